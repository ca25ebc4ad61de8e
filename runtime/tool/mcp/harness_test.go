package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// token is what the test environment gives ${MCP_TOKEN}.
const token = "s3cret-token"

// shop is a real MCP server over streamable HTTP: lookup reads, charge
// writes and counts its calls, void always fails.
type shop struct {
	ts      *httptest.Server
	server  *sdk.Server
	lookups atomic.Int32
	charges atomic.Int32

	mu      sync.Mutex
	handler http.Handler
	auth    []string // the Authorization header of every request
	status  []int    // the status of every answer
	// cut closes the connection of the next tools/call of the named tool
	// before the server sees it; forget makes the server forget its
	// sessions just before it.
	cut, forget string
	// refuse answers the next tools/call of the named tool 401, as a
	// server that no longer accepts the caller's credential.
	refuse string
	// gate, when set, holds every lookup until it is closed.
	gate chan struct{}
}

type orderArgs struct {
	OrderID     string `json:"order_id"`
	AmountCents int    `json:"amount_cents,omitempty"`
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func newShop(t *testing.T) *shop {
	t.Helper()
	s := &shop{server: sdk.NewServer(&sdk.Implementation{Name: "shop", Version: "1"}, nil)}
	sdk.AddTool(s.server, &sdk.Tool{Name: "lookup", Description: "Looks an order up.\nSecond line.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *sdk.CallToolRequest, in orderArgs) (*sdk.CallToolResult, any, error) {
			s.lookups.Add(1)
			s.mu.Lock()
			gate := s.gate
			s.mu.Unlock()
			if gate != nil {
				<-gate
			}
			return text("order " + in.OrderID + ": open, 5000 cents"), nil, nil
		})
	sdk.AddTool(s.server, &sdk.Tool{Name: "charge", Description: "Charges an order's card."},
		func(_ context.Context, _ *sdk.CallToolRequest, in orderArgs) (*sdk.CallToolResult, any, error) {
			n := s.charges.Add(1)
			return text(fmt.Sprintf("charged %s %d cents (charge #%d)", in.OrderID, in.AmountCents, n)), nil, nil
		})
	sdk.AddTool(s.server, &sdk.Tool{Name: "void", Description: "Voids an order.",
		Annotations: &sdk.ToolAnnotations{IdempotentHint: true}},
		func(context.Context, *sdk.CallToolRequest, orderArgs) (*sdk.CallToolResult, any, error) {
			return nil, nil, errors.New("the order is already closed")
		})
	s.handler = s.fresh()
	s.ts = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.ts.Close)
	return s
}

// fresh returns a handler that knows no session.
func (s *shop) fresh() http.Handler {
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.server }, nil)
}

func (s *shop) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	json.Unmarshal(body, &msg)
	s.mu.Lock()
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	call := msg.Method == "tools/call"
	if call && s.forget == msg.Params.Name {
		s.forget, s.handler = "", s.fresh()
	}
	cut := call && s.cut == msg.Params.Name
	if cut {
		s.cut = ""
	}
	refuse := call && s.refuse == msg.Params.Name
	if refuse {
		s.refuse = ""
		s.status = append(s.status, http.StatusUnauthorized)
	}
	h := s.handler
	s.mu.Unlock()
	if refuse {
		http.Error(w, "invalid token", http.StatusUnauthorized)
		return
	}
	if cut {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	h.ServeHTTP(sw, r)
	s.mu.Lock()
	s.status = append(s.status, sw.status)
	s.mu.Unlock()
}

// statusWriter notes the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

// answered counts the answers with the status.
func (s *shop) answered(status int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.status {
		if st == status {
			n++
		}
	}
	return n
}

// restart makes the server forget every session, as a restarted server
// would.
func (s *shop) restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = s.fresh()
}

// cutPending reports whether the cut is still to happen.
func (s *shop) cutPending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cut != ""
}

func (s *shop) headers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

// env is the environment the tests' sources read.
func (s *shop) env(name string) string {
	switch name {
	case "MCP_URL":
		return s.ts.URL
	case "MCP_TOKEN":
		return token
	}
	return ""
}

// fixture is a world whose engine brings the shop's tools through an MCP
// source, and the shop.
type fixture struct {
	*testrig.World
	src  *mcp.Source
	shop *shop
}

func newFixture(t *testing.T, yamls ...string) *fixture {
	t.Helper()
	s := newShop(t)
	src := mcp.NewSource(mcp.Options{Getenv: s.env})
	t.Cleanup(func() { src.Close() })
	w := testrig.New(t, testrig.Configs(yamls...), testrig.Engine(runtime.Options{Source: src}),
		testrig.Prompt("Charge order A-1"))
	return &fixture{World: w, src: src, shop: s}
}

// start starts a run and runs it until it pauses or settles.
func (f *fixture) start(t *testing.T, cfg string) runtime.Outcome {
	t.Helper()
	out, _ := f.Start(t, testrig.Launch{Configuration: cfg})
	return out
}

// results returns the tool results of a run's transcript, in order.
func (f *fixture) results(t *testing.T, runID int64) []runtime.Message {
	t.Helper()
	res, err := f.Store.Resume(context.Background(), runID, true)
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Message
	for _, b := range res.Messages {
		var m runtime.Message
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m.Role == "tool" {
			out = append(out, m)
		}
	}
	return out
}

// waitingOn requires the run to wait for an approval of exactly one call.
func waitingOn(t *testing.T, out runtime.Outcome, tool string) {
	t.Helper()
	if out.Status != runtime.StatusWaitingForApproval || out.Pending == nil ||
		len(out.Pending.Calls) != 1 || out.Pending.Calls[0].Name != tool {
		t.Fatalf("outcome = %+v (pending %+v), want waiting for an approval of %s", out, out.Pending, tool)
	}
}

func completed(t *testing.T, out runtime.Outcome) {
	t.Helper()
	if out.Status != runtime.StatusCompleted {
		t.Fatalf("outcome = %+v, want completed", out)
	}
}
