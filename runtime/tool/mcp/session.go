package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"

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

	mu  sync.Mutex
	cur *session // nil until opened, and after it failed
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

// acquire returns the open session, opening one if there is none, and
// counts the caller as its user until release.
func (e *endpoint) acquire(ctx context.Context) (*session, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cur == nil {
		cs, err := e.open(ctx)
		if err != nil {
			return nil, err
		}
		e.cur = &session{cs: cs}
	}
	e.cur.users++
	return e.cur, nil
}

func (e *endpoint) open(ctx context.Context) (*mcpsdk.ClientSession, error) {
	if e.src.isClosed() {
		return nil, errSourceClosed
	}
	ctx, cancel := context.WithTimeout(ctx, e.src.opts.ConnectTimeout)
	defer cancel()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "turnstile", Version: "1"}, nil)
	t := &mcpsdk.StreamableClientTransport{
		Endpoint:   e.url,
		HTTPClient: &http.Client{Transport: &headerTransport{base: e.src.opts.base(), headers: e.headers}},
		// Turnstile only asks; it never needs the server to speak first.
		DisableStandaloneSSE: true,
	}
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return cs, nil
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
		s.cs.Close()
	}
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

// list returns the server's tools, every page of them. Listing changes
// nothing, so any transport failure re-opens the session and lists again,
// once.
func (e *endpoint) list(ctx context.Context) ([]*mcpsdk.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, e.src.opts.ConnectTimeout)
	defer cancel()
	for try := 0; ; try++ {
		s, err := e.acquire(ctx)
		if err != nil {
			return nil, e.redact(err)
		}
		d := &delivery{}
		var tools []*mcpsdk.Tool
		for t, lerr := range s.cs.Tools(context.WithValue(ctx, deliveryKey{}, d), nil) {
			if lerr != nil {
				err = lerr
				break
			}
			tools = append(tools, t)
		}
		failed := err != nil && d.failed(err)
		e.release(s, failed)
		if err == nil {
			return tools, nil
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
		s, err := e.acquire(cctx)
		if err != nil {
			return nil, e.redact(err)
		}
		d := &delivery{}
		res, err := s.cs.CallTool(context.WithValue(cctx, deliveryKey{}, d),
			&mcpsdk.CallToolParams{Name: name, Arguments: args})
		failed := err != nil && cctx.Err() == nil && d.failed(err)
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
	changed := false
	for name, v := range e.secrets {
		// A value this short says nothing, and replacing it would garble
		// the message.
		if len(v) >= 4 && strings.Contains(msg, v) {
			msg, changed = strings.ReplaceAll(msg, v, "${"+name+"}"), true
		}
	}
	if !changed {
		return err
	}
	return &redacted{msg: msg, err: err}
}

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
	resp, err := t.base.RoundTrip(req)
	if d != nil && resp != nil {
		d.mu.Lock()
		d.status = resp.StatusCode
		d.mu.Unlock()
	}
	return resp, err
}
