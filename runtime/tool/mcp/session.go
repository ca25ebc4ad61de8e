package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnstile-dev/turnstile/runtime"
)

// endpoint is one MCP server as reached with one set of headers. It holds
// at most one open session, shared by every run that calls the server.
type endpoint struct {
	src     *Source
	url     string
	headers http.Header
	// secrets are the environment values in url and headers, by variable
	// name: errors a model or a log sees show ${NAME} instead.
	secrets map[string]string
	// cred is the run credential a forwarding endpoint sends, nil for
	// every other.
	cred *runtime.RunCredential

	mu      sync.Mutex
	cur     *session    // nil until opened, and after it failed
	dialing *attempt    // the connection attempt under way, if any
	failure *failedDial // the last attempt's failure, until it expires
}

// session is an open MCP session and the calls using it. A session that
// failed is retired: no new call uses it, and it is closed once the calls
// still using it are done, so that one run's failure never cuts another
// run's call short.
type session struct {
	cs      *mcpsdk.ClientSession
	users   int  // guarded by endpoint.mu
	retired bool // guarded by endpoint.mu
}

// attempt is one connection attempt, whose result every caller that asked
// for a session while it ran shares.
type attempt struct {
	done chan struct{} // closed when err is set
	err  error
}

// failedDial is a failed connection attempt, remembered so that the runs
// that start soon after are told at once instead of trying again.
type failedDial struct {
	until time.Time
	err   error
}

func (f *failedDial) Error() string {
	return "not tried again until " + f.until.UTC().Format("15:04:05 UTC") + ": " + f.err.Error()
}

func (f *failedDial) Unwrap() error { return f.err }

// acquire returns the open session, connecting if there is none, and
// counts the caller as its user until release. Callers that come while a
// connection attempt runs wait for it rather than starting their own, each
// no longer than its ctx allows; within Options.RetryAfter of a failed
// attempt they get its error at once.
func (e *endpoint) acquire(ctx context.Context) (*session, error) {
	for {
		e.mu.Lock()
		if e.cur != nil {
			s := e.cur
			s.users++
			e.mu.Unlock()
			return s, nil
		}
		if f := e.failure; f != nil && time.Now().Before(f.until) {
			e.mu.Unlock()
			return nil, f
		}
		a := e.dialing
		if a == nil {
			a = &attempt{done: make(chan struct{})}
			e.dialing = a
			// The attempt runs on its own: a caller that gives up must not
			// end it for the others waiting.
			go e.dial(a)
		}
		e.mu.Unlock()
		select {
		case <-a.done:
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to %s: %w", e.shownURL(), context.Cause(ctx))
		}
		if a.err != nil {
			return nil, a.err
		}
		// The new session is e.cur unless a call retired it in the
		// meantime; the loop then takes it or tries again.
	}
}

// dial runs a connection attempt and publishes its result.
func (e *endpoint) dial(a *attempt) {
	cs, err := e.open()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dialing = nil
	switch {
	case err == nil && e.src.isClosed():
		// Close ran while the attempt did and found no session to close.
		go cs.Close()
		err = errSourceClosed
	case err == nil:
		e.cur = &session{cs: cs}
		e.failure = nil
	case errors.Is(err, errSourceClosed):
	case e.src.opts.RetryAfter > 0:
		e.failure = &failedDial{until: time.Now().Add(e.src.opts.RetryAfter), err: err}
	}
	a.err = err
	close(a.done)
}

// open connects and initializes a session, within ConnectTimeout. Its
// error says what went wrong in words a person can act on.
func (e *endpoint) open() (*mcpsdk.ClientSession, error) {
	if e.src.isClosed() {
		return nil, errSourceClosed
	}
	timeout := e.src.opts.ConnectTimeout
	ctx, cancel := context.WithTimeout(e.src.base, timeout)
	defer cancel()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "turnstile", Version: "1"}, &mcpsdk.ClientOptions{
		// Advertise only what Turnstile serves: none of roots, sampling or
		// elicitation. The SDK's default advertises roots, and a server
		// that then asks for them waits in vain (the standalone stream,
		// which would carry the request, is disabled below).
		Capabilities: &mcpsdk.ClientCapabilities{},
	})
	t := &mcpsdk.StreamableClientTransport{
		Endpoint:   e.url,
		HTTPClient: &http.Client{Transport: &headerTransport{base: e.src.opts.base(), headers: e.headers, cred: e.cred}},
		// Turnstile only asks; it never needs the server to speak first.
		DisableStandaloneSSE: true,
	}
	d := &delivery{}
	type connected struct {
		cs  *mcpsdk.ClientSession
		err error
	}
	done := make(chan connected, 1)
	go func() {
		cs, err := client.Connect(context.WithValue(ctx, deliveryKey{}, d), t, nil)
		done <- connected{cs, err}
	}()
	var res connected
	select {
	case res = <-done:
	case <-ctx.Done():
		// The SDK returns from a timed-out Connect only after closing the
		// half-made session, which waits up to 5s for its cancellation
		// notice to reach a server that may never answer: the attempt's
		// waiters are told at the deadline, and that ends on its own.
		go func() {
			if late := <-done; late.cs != nil {
				late.cs.Close()
			}
		}()
		res.err = ctx.Err()
	}
	if res.err == nil {
		return res.cs, nil
	}
	if e.src.isClosed() {
		return nil, errSourceClosed
	}
	return nil, e.connectError(ctx, res.err, d, timeout)
}

// connectError explains why a connection failed, from the status of the
// server's last answer or the network's error, keeping the SDK's wording
// only when neither says more.
func (e *endpoint) connectError(ctx context.Context, err error, d *delivery, timeout time.Duration) error {
	d.mu.Lock()
	status := d.status
	d.mu.Unlock()
	where := "cannot connect to " + e.shownURL()
	var urlErr *url.Error
	var msg string
	switch {
	case ctx.Err() != nil:
		msg = fmt.Sprintf("%s: no answer within %s", where, timeout)
	case errors.As(err, &urlErr):
		// The last request failed in the network: an earlier answer's
		// status is not the reason.
		msg = where + ": " + netCause(err)
	case status == http.StatusUnauthorized && e.cred != nil:
		return &redacted{msg: "the server refused the run's credential (HTTP 401)", err: errors.Join(errUnauthorized, err)}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		msg = fmt.Sprintf("the server refused the credentials (HTTP %d)", status)
	case status >= 300:
		msg = fmt.Sprintf("%s: the server answered HTTP %d %s", where, status, http.StatusText(status))
	default:
		msg = where + ": " + err.Error()
	}
	return &redacted{msg: e.redactString(msg), err: err}
}

// netCause is the network's reason in an error of Go's HTTP client,
// without the request's URL that it puts in front: "connection refused",
// "no such host", a TLS failure.
func netCause(err error) string {
	var dnsErr *net.DNSError
	var sysErr *os.SyscallError
	var urlErr *url.Error
	switch {
	case errors.As(err, &dnsErr):
		return dnsErr.Err
	case errors.As(err, &sysErr):
		return sysErr.Err.Error()
	case errors.As(err, &urlErr):
		return urlErr.Err.Error()
	}
	return err.Error()
}

// shownURL is the endpoint's URL as messages show it: with the
// environment's values replaced by their ${NAME} first, then without user
// information, query or fragment, which often carry a key. It is cut as a
// string: url.URL.String would escape the braces of ${NAME}.
func (e *endpoint) shownURL() string {
	s := e.redactString(e.url)
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	authority, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = authority[at+1:]
	}
	return scheme + "://" + authority + path
}

// release ends a use of s. A failed session is retired: the next acquire
// opens a new one, and s closes with its last user.
func (e *endpoint) release(s *session, failed bool) {
	e.mu.Lock()
	s.users--
	if failed {
		s.retired = true
		if e.cur == s {
			e.cur = nil
		}
	}
	done := s.retired && s.users == 0
	e.mu.Unlock()
	if done {
		// Closing waits for the SDK's notices of cancelled calls, up to 5s
		// for a server that does not answer; no caller needs to wait for
		// that, and the error of closing a failed session says nothing.
		go s.cs.Close()
	}
}

// retire retires the open session: no new call uses it, and it closes
// with its last user.
func (e *endpoint) retire() {
	e.mu.Lock()
	s := e.cur
	e.cur = nil
	done := false
	if s != nil {
		s.retired = true
		done = s.users == 0
	}
	e.mu.Unlock()
	if done {
		go s.cs.Close()
	}
}

// errUnauthorized marks a forwarding server's 401: the run's credential
// was refused, and a new one may be minted.
var errUnauthorized = errors.New("the server refused the run's credential")

// bearer is the credential a forwarding endpoint sends now, "" for any
// other.
func (e *endpoint) bearer() string {
	if e.cred == nil {
		return ""
	}
	return e.cred.Bearer()
}

// renew answers a forwarding server's 401 to refused: a new credential,
// and a new session opened with it (the open one was opened with the
// refused one). False when the endpoint forwards nothing or no new
// credential could be had.
func (e *endpoint) renew(ctx context.Context, refused string) bool {
	if e.cred == nil {
		return false
	}
	if err := e.cred.Renew(ctx, refused); err != nil {
		e.src.opts.Logger.Warn("run credential not renewed after a 401", "server", e.shownURL(), "err", err)
		return false
	}
	e.mu.Lock()
	e.failure = nil
	e.mu.Unlock()
	e.retire()
	return true
}

// close closes the open session, whoever uses it.
func (e *endpoint) close() error {
	e.mu.Lock()
	s := e.cur
	e.cur = nil
	e.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.cs.Close()
}

// list returns the server's tools, every page of them, within
// ConnectTimeout (a connection attempt has its own). Listing changes
// nothing, so any transport failure re-opens the session and lists again,
// once.
func (e *endpoint) list(ctx context.Context) ([]*mcpsdk.Tool, error) {
	for try := 0; ; try++ {
		refused := e.bearer()
		s, err := e.acquire(ctx)
		if err != nil {
			if try == 0 && errors.Is(err, errUnauthorized) && e.renew(ctx, refused) {
				continue
			}
			return nil, e.redact(err)
		}
		d := &delivery{}
		var tools []*mcpsdk.Tool
		lctx, cancel := context.WithTimeout(ctx, e.src.opts.ConnectTimeout)
		for t, lerr := range s.cs.Tools(context.WithValue(lctx, deliveryKey{}, d), nil) {
			if lerr != nil {
				err = lerr
				break
			}
			tools = append(tools, t)
		}
		timedOut := lctx.Err() != nil
		cancel()
		unauthorized := err != nil && e.cred != nil && d.unauthorized()
		failed := err != nil && (d.failed(err) || unauthorized)
		e.release(s, failed)
		if err == nil {
			return tools, nil
		}
		if unauthorized && (try > 0 || !e.renew(ctx, refused)) {
			return nil, &redacted{msg: "list tools: the server refused the run's credential (HTTP 401)", err: err}
		}
		if timedOut && ctx.Err() == nil {
			return nil, &redacted{msg: fmt.Sprintf("list tools: no answer within %s", e.src.opts.ConnectTimeout), err: err}
		}
		if !failed || ctx.Err() != nil || try > 0 {
			return nil, e.redact(fmt.Errorf("list tools: %w", err))
		}
	}
}

// call calls a tool of the server. A call that fails in transport is
// repeated once, on a re-opened session, only when that cannot do the
// tool's work twice: when the request certainly never reached the server
// (nothing of it was written, or the server answered 404: it no longer
// knows the session and so ran nothing), or when the tool is read-only or
// idempotent. An answer of the server, even an error, is never repeated.
func (e *endpoint) call(ctx context.Context, name string, args json.RawMessage, effect runtime.Effect) (*mcpsdk.CallToolResult, error) {
	timeout := e.src.opts.CallTimeout
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	for try := 0; ; try++ {
		refused := e.bearer()
		s, err := e.acquire(cctx)
		if err != nil {
			// Refused while connecting: the call was never sent.
			if try == 0 && errors.Is(err, errUnauthorized) && e.renew(cctx, refused) {
				continue
			}
			return nil, e.redact(err)
		}
		d := &delivery{}
		res, err := s.cs.CallTool(context.WithValue(cctx, deliveryKey{}, d),
			&mcpsdk.CallToolParams{Name: name, Arguments: args})
		unauthorized := err != nil && e.cred != nil && d.unauthorized()
		failed := err != nil && cctx.Err() == nil && (d.failed(err) || unauthorized)
		e.release(s, failed)
		switch {
		case err == nil:
			return res, nil
		case ctx.Err() != nil:
			return nil, e.redact(err)
		case cctx.Err() != nil:
			return nil, fmt.Errorf("no answer within %s", timeout)
		case !failed:
			return nil, e.redact(err)
		}
		if unauthorized {
			// One new credential and session per refusal; the call is
			// repeated with them only where repeating is safe, as below.
			renewed := try == 0 && e.renew(cctx, refused)
			if !renewed || effect == runtime.NonIdempotentWrite {
				return nil, &redacted{msg: "the server refused the run's credential (HTTP 401); the call was not repeated", err: err}
			}
			continue
		}
		if try > 0 || (effect == runtime.NonIdempotentWrite && !d.undelivered()) {
			return nil, e.redact(err)
		}
	}
}

// rejectedCode is the code the SDK gives a request its transport refused
// (jsonrpc2.ErrRejected, which it does not export).
const rejectedCode = -32005

// failed reports whether err is a failure of the transport or the session
// rather than the server's answer (a JSON-RPC error it sent). An answer of
// 404 is a failure whatever its body: the server no longer knows the
// session.
func (d *delivery) failed(err error) bool {
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code == rejectedCode {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status == http.StatusNotFound
}

// redact keeps the environment's values out of an error's message.
func (e *endpoint) redact(err error) error {
	msg := err.Error()
	if clean := e.redactString(msg); clean != msg {
		return &redacted{msg: clean, err: err}
	}
	return err
}

// redactString replaces the environment's values in s with their ${NAME}.
func (e *endpoint) redactString(s string) string {
	for name, v := range e.secrets {
		// A value this short says nothing, and replacing it would garble
		// the message.
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "${"+name+"}")
		}
	}
	return s
}

// redacted is an error told in other words than its own: without the
// environment's values, or more plainly.
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// delivery records what became of the HTTP requests of one call, which
// decides whether the call may be repeated.
type delivery struct {
	mu     sync.Mutex
	posts  int  // requests sent for the call
	wrote  bool // some request was written, in part or whole
	status int  // the status of the last answer
}

type deliveryKey struct{}

// unauthorized reports whether the last answer was 401.
func (d *delivery) unauthorized() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.status == http.StatusUnauthorized
}

// undelivered reports whether the call certainly never ran on the server.
func (d *delivery) undelivered() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.posts == 0 || !d.wrote || d.status == http.StatusNotFound
}

// headerTransport adds an endpoint's headers to every request, and records
// the delivery of a call's requests.
type headerTransport struct {
	base    http.RoundTripper
	headers http.Header
	// cred, when set, is sent as the bearer: read at each request, so a
	// renewed credential is what the next request carries.
	cred *runtime.RunCredential
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	d, _ := ctx.Value(deliveryKey{}).(*delivery)
	if d != nil && req.Method == http.MethodPost {
		d.mu.Lock()
		d.posts++
		d.mu.Unlock()
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() {
			d.mu.Lock()
			d.wrote = true
			d.mu.Unlock()
		}})
	} else {
		d = nil
	}
	req = req.Clone(ctx)
	for k, vs := range t.headers {
		req.Header[k] = vs
	}
	if t.cred != nil {
		req.Header.Set("Authorization", "Bearer "+t.cred.Bearer())
	}
	resp, err := t.base.RoundTrip(req)
	if d != nil && resp != nil {
		d.mu.Lock()
		d.status = resp.StatusCode
		d.mu.Unlock()
	}
	return resp, err
}
