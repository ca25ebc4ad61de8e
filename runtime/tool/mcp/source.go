// Package mcp brings the tools of MCP servers into runs: a configuration's
// mcp_servers are reached over streamable HTTP with the official Go SDK,
// their tools are listed when a continuation starts and offered to the
// model as "<server>__<tool>" (see ToolName).
//
// Approval: every tool of a server needs an approval unless the server's
// requires_approval is false; a configuration's tool policy, keyed by the
// name the model sees, overrides that per tool. A tool's annotations only
// decide its effect (readOnlyHint: read_only, idempotentHint:
// idempotent_write, else non_idempotent_write), which the engine uses to
// guard interrupted writes.
//
// Failures: a result the server marks as an error, and a server that cannot
// be reached, become errors the model sees. A server that cannot be
// reached, refuses the credentials or lacks an environment variable when a
// continuation starts makes Tools return a *runtime.UnavailableError for it.
// A failed connection is remembered for Options.RetryAfter: until then
// every run is told the remembered cause at once instead of waiting for a
// connection of its own, and runs that ask at the same time share one
// connection attempt. A session that failed is
// re-opened, and the call repeated, once, and only when that cannot run a
// write twice: the request certainly never reached the tool (nothing of it
// was written, or the server answered 404, no longer knowing the session),
// or the tool is read-only or idempotent.
//
// A server with meta_tool set offers three tools instead of its own:
// "<server>__discover" and "<server>__describe_tool", which read, and
// "<server>__execute", which calls one of the server's tools by name, is
// taken to write, and needs an approval as the server's tools would.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Options configure a Source; every field is optional.
type Options struct {
	// Getenv reads the variables of ${NAME} in URLs and headers; os.Getenv
	// when nil. An empty value counts as unset.
	Getenv func(string) string
	// HTTPClient's transport carries the requests; http.DefaultTransport
	// when nil.
	HTTPClient *http.Client
	// ConnectTimeout bounds opening a session, and then listing a server's
	// tools (30s each when zero); CallTimeout bounds one tool call, a repeat
	// included (5m when zero).
	ConnectTimeout time.Duration
	CallTimeout    time.Duration
	// RetryAfter is how long a server that could not be connected to is
	// not tried again (30s when zero; never remembered when negative): a
	// hanging server would otherwise cost every continuation the whole
	// ConnectTimeout before its first round.
	RetryAfter time.Duration
	Logger     *slog.Logger
}

func (o Options) base() http.RoundTripper {
	if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
		return o.HTTPClient.Transport
	}
	return http.DefaultTransport
}

// Source is a runtime.ToolSource of MCP servers. It keeps one session per
// server URL and headers, shared by all runs; it is safe for concurrent
// use. Close it when done.
type Source struct {
	opts Options
	// base is the context of connection attempts, which are shared by the
	// runs that wait for them and so belong to none of them; Close cancels
	// it.
	base   context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	endpoints map[string]*endpoint
	// listed are the tools each forwarding server entry last listed (by
	// name and URL), for the checks that run without a run's credential:
	// an edited call's schema.
	listed map[string][]*mcpsdk.Tool
	closed bool
}

var _ runtime.ToolSource = (*Source)(nil)

var errSourceClosed = errors.New("mcp: the tool source is closed")

// NewSource returns a Source; it connects to nothing until asked for tools.
func NewSource(opts Options) *Source {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 30 * time.Second
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 5 * time.Minute
	}
	if opts.RetryAfter == 0 {
		opts.RetryAfter = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	base, cancel := context.WithCancel(context.Background())
	return &Source{opts: opts, base: base, cancel: cancel, endpoints: map[string]*endpoint{}, listed: map[string][]*mcpsdk.Tool{}}
}

// Tools returns the tools of cfg's MCP servers: each server's own, listed
// now, or the meta-tool's three. A server that cannot be reached or listed
// (or whose ${NAME} is unset) adds a *runtime.UnavailableError naming it
// and the cause, and the tools of the others are still returned; the
// errors are joined with errors.Join.
func (s *Source) Tools(ctx context.Context, cfg *runtime.Configuration) ([]runtime.Tool, error) {
	var tools []runtime.Tool
	var errs []error
	seen := map[string]bool{}
	for _, srv := range cfg.MCPServers {
		got, err := s.serverTools(ctx, srv, false)
		if err != nil {
			errs = append(errs, unavailable(srv.Name, err))
			continue
		}
		for _, t := range got {
			name := t.Spec().Name
			if seen[name] {
				s.opts.Logger.Warn("mcp tool offered twice; the first is kept", "configuration", cfg.Identifier, "tool", name)
				continue
			}
			seen[name] = true
			tools = append(tools, t)
		}
	}
	return tools, errors.Join(errs...)
}

// Check connects to one server entry and lists its tools, meta_tool or
// not, and returns how many it has. It fails with a
// *runtime.UnavailableError, as Tools would, when the server cannot be
// reached or listed or a ${NAME} of the entry is unset.
func (s *Source) Check(ctx context.Context, srv runtime.MCPServer) (int, error) {
	tools, err := s.serverTools(ctx, srv, true)
	if err != nil {
		return 0, unavailable(srv.Name, err)
	}
	return len(tools), nil
}

// unavailable is the error of a server whose tools could not be brought.
// err is already redacted.
func unavailable(server string, err error) error {
	return &runtime.UnavailableError{Source: "mcp server " + server, Prefix: server + Separator, Cause: err.Error()}
}

// serverTools returns a server's tools; a meta_tool server's three without
// reaching the server, unless list is set.
func (s *Source) serverTools(ctx context.Context, srv runtime.MCPServer, list bool) ([]runtime.Tool, error) {
	if err := CheckServerName(srv.Name); err != nil {
		return nil, err
	}
	var cred *runtime.RunCredential
	approval := srv.RequiresApproval == nil || *srv.RequiresApproval
	if srv.Identity == runtime.IdentityForward {
		if cred = runtime.CredentialFrom(ctx); cred == nil && runtime.MintFailed(ctx) {
			return nil, errNoCredential
		} else if cred == nil {
			return s.uncredentialed(srv, list, approval)
		}
	}
	ep, err := s.endpoint(srv, cred)
	if err != nil {
		return nil, err
	}
	if srv.MetaTool && !list {
		return metaTools(ep, srv.Name, approval), nil
	}
	listed, err := ep.list(ctx)
	if err != nil {
		return nil, err
	}
	if cred != nil {
		s.mu.Lock()
		s.listed[srv.Name+"\n"+srv.URL] = listed
		s.mu.Unlock()
	}
	tools := make([]runtime.Tool, 0, len(listed))
	for _, t := range listed {
		tools = append(tools, newTool(ep, srv.Name, t, approval))
	}
	return tools, nil
}

// uncredentialed are a forwarding server's tools where there is no run
// credential to reach it with (a decision checking an edited call):
// those it listed last in this process, which describe themselves but
// cannot be called; errNoCredential when it listed none here.
func (s *Source) uncredentialed(srv runtime.MCPServer, list, approval bool) ([]runtime.Tool, error) {
	if srv.MetaTool && !list {
		return metaTools(nil, srv.Name, approval), nil
	}
	s.mu.Lock()
	listed, ok := s.listed[srv.Name+"\n"+srv.URL]
	s.mu.Unlock()
	if !ok || list {
		return nil, errNoCredential
	}
	tools := make([]runtime.Tool, 0, len(listed))
	for _, t := range listed {
		tools = append(tools, newTool(nil, srv.Name, t, approval))
	}
	return tools, nil
}

// MissingVariables returns the environment variables that the URL and
// headers of a server entry refer to and that getenv gives no value, each
// once: the server cannot be reached until they are set.
func MissingVariables(srv runtime.MCPServer, getenv func(string) string) []string {
	var missing []string
	for _, tmpl := range append([]string{srv.URL}, slices.Collect(maps.Values(srv.Headers))...) {
		for _, name := range Variables(tmpl) {
			if getenv(name) == "" && !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
		}
	}
	sort.Strings(missing)
	return missing
}

// errNoCredential is why a forwarding server is unavailable to a run
// that has no credential to send it.
var errNoCredential = errors.New("identity: forward, but the run has no credential to send (minting it failed; see the log)")

// endpoint returns the endpoint of a server entry, with its URL and headers
// read from the environment now. Every unset variable of the entry is
// named in one *unsetError. A forwarding entry (cred set) gets an
// endpoint of its own per credential, which closes when the credential is
// revoked: its sessions were opened as the run's owner and serve no other
// run.
func (s *Source) endpoint(srv runtime.MCPServer, cred *runtime.RunCredential) (*endpoint, error) {
	// A malformed reference is reported as such before any variable is
	// read.
	if err := CheckTemplate(srv.URL); err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	for name, v := range srv.Headers {
		if err := CheckTemplate(v); err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
	}
	if missing := MissingVariables(srv, s.opts.Getenv); len(missing) > 0 {
		return nil, &unsetError{names: missing}
	}
	secrets := map[string]string{}
	url, used, err := interpolate(srv.URL, s.opts.Getenv)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	for k, v := range used {
		secrets[k] = v
	}
	if url == "" {
		return nil, fmt.Errorf("no url")
	}
	headers := http.Header{}
	names := make([]string, 0, len(srv.Headers))
	for name := range srv.Headers {
		names = append(names, name)
	}
	sort.Strings(names)
	key := []string{url}
	for _, name := range names {
		if err := CheckHeaderName(name); err != nil {
			return nil, err
		}
		v, used, err := interpolate(srv.Headers[name], s.opts.Getenv)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", name, err)
		}
		for k, v := range used {
			secrets[k] = v
		}
		headers.Set(name, v)
		key = append(key, http.CanonicalHeaderKey(name)+": "+v)
	}
	if cred != nil {
		// Checked again here, on the URL as the environment makes it.
		if err := runtime.CheckForwardURL(url); err != nil {
			return nil, err
		}
		key = append(key, fmt.Sprintf("run credential %p", cred))
	}
	k := strings.Join(key, "\n")

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errSourceClosed
	}
	ep, ok := s.endpoints[k]
	if !ok {
		ep = &endpoint{src: s, url: url, headers: headers, secrets: secrets, cred: cred}
		s.endpoints[k] = ep
		if cred != nil {
			cred.OnEnd(func() { s.forget(k, ep) })
		}
	}
	return ep, nil
}

// forget drops a forwarding endpoint whose credential was revoked and
// closes its session; calls still using it finish first.
func (s *Source) forget(k string, ep *endpoint) {
	s.mu.Lock()
	if s.endpoints[k] == ep {
		delete(s.endpoints, k)
	}
	s.mu.Unlock()
	ep.retire()
}

func (s *Source) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close closes every open session; calls and connection attempts in flight
// fail. Afterwards Tools and every tool's Call fail. The error joins the
// sessions' errors in closing, which a server already gone causes.
func (s *Source) Close() error {
	s.cancel()
	s.mu.Lock()
	s.closed = true
	eps := slices.Collect(maps.Values(s.endpoints))
	s.mu.Unlock()
	var errs []error
	for _, ep := range eps {
		if err := ep.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
