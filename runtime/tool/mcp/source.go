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
// be reached, become errors the model sees. A session that failed is
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
	// ConnectTimeout bounds opening a session and listing a server's tools
	// (30s when zero); CallTimeout bounds one tool call, a repeat included
	// (5m when zero).
	ConnectTimeout time.Duration
	CallTimeout    time.Duration
	Logger         *slog.Logger
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

	mu        sync.Mutex
	endpoints map[string]*endpoint
	closed    bool
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
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Source{opts: opts, endpoints: map[string]*endpoint{}}
}

// Tools returns the tools of cfg's MCP servers: each server's own, listed
// now, or the meta-tool's three. A server that cannot be reached or listed
// (or whose ${NAME} is unset) adds an error naming it, and the tools of the
// others are still returned.
func (s *Source) Tools(ctx context.Context, cfg *runtime.Configuration) ([]runtime.Tool, error) {
	var tools []runtime.Tool
	var errs []error
	seen := map[string]bool{}
	for _, srv := range cfg.MCPServers {
		got, err := s.serverTools(ctx, srv)
		if err != nil {
			errs = append(errs, fmt.Errorf("mcp server %s: %w", srv.Name, err))
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

func (s *Source) serverTools(ctx context.Context, srv runtime.MCPServer) ([]runtime.Tool, error) {
	if err := CheckServerName(srv.Name); err != nil {
		return nil, err
	}
	ep, err := s.endpoint(srv)
	if err != nil {
		return nil, err
	}
	approval := srv.RequiresApproval == nil || *srv.RequiresApproval
	if srv.MetaTool {
		return metaTools(ep, srv.Name, approval), nil
	}
	listed, err := ep.list(ctx)
	if err != nil {
		return nil, err
	}
	tools := make([]runtime.Tool, 0, len(listed))
	for _, t := range listed {
		tools = append(tools, newTool(ep, srv.Name, t, approval))
	}
	return tools, nil
}

// endpoint returns the endpoint of a server entry, with its URL and headers
// read from the environment now.
func (s *Source) endpoint(srv runtime.MCPServer) (*endpoint, error) {
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
	k := strings.Join(key, "\n")

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errSourceClosed
	}
	ep, ok := s.endpoints[k]
	if !ok {
		ep = &endpoint{src: s, url: url, headers: headers, secrets: secrets}
		s.endpoints[k] = ep
	}
	return ep, nil
}

func (s *Source) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close closes every open session; calls in flight fail. Afterwards Tools
// and every tool's Call fail. The error joins the sessions' errors in
// closing, which a server already gone causes.
func (s *Source) Close() error {
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
