package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp/examplemcp"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// forwardKillYAML pauses on a refund, then asks the orders server, which
// is sent the run's credential, for the owner's orders.
const forwardKillYAML = `
identifier: forward
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}", reason: "x"}}]
      - tool_calls: [{name: orders__my_orders, arguments: {}}]
      - text: "Done."
tools: [refund_order]
mcp_servers:
  - name: orders
    url: ${ORDERS_URL}
    identity: forward
    requires_approval: false
`

// heldOrders is the example server's data: the first listing is held
// until its request dies with its process.
type heldOrders struct {
	held chan struct{} // closed when the first listing is held

	mu    sync.Mutex
	calls int
}

func (h *heldOrders) OrdersOf(ctx context.Context, owner string) ([]examplemcp.Order, error) {
	h.mu.Lock()
	h.calls++
	first := h.calls == 1
	h.mu.Unlock()
	if first {
		close(h.held)
		<-ctx.Done() // the serving process dies with the call in flight
		return nil, ctx.Err()
	}
	return []examplemcp.Order{{ID: "ORD-1", Customer: owner, AmountCents: 100, Currency: "EUR"}}, nil
}

// A worker that takes a run over after its serving process was killed
// with -9 mints a credential of its own: the orders server sees a new
// one, live, and the dead process's one is inactive.
func TestKilledServerCredentialIsReplacedByTheWorkers(t *testing.T) {
	r := newRig(t, forwardKillYAML)
	h := &heldOrders{held: make(chan struct{})}
	var mu sync.Mutex
	var bearers []string
	inner := examplemcp.Handler(examplemcp.Direct(r.Store.IntrospectRunToken), h)
	orders := httptest.NewServer(recordBearer(inner, func(b string) {
		mu.Lock()
		bearers = append(bearers, b)
		mu.Unlock()
	}))
	defer orders.Close()
	env := childEnv("ORDERS_URL=" + orders.URL)

	w := r.waiting(t, "forward")
	addr := freeAddr(t)
	s := startServer(t, addr, env, "--addr", addr, "--dsn", r.DSN, "--workers", "0", lease)
	b := signIn(t, s.addr, "operator")
	page := b.inbox(t)
	b.stream(t, w.id, page.digests[w.id])
	select {
	case <-h.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the orders server was never asked")
	}
	mu.Lock()
	first := bearers[len(bearers)-1]
	mu.Unlock()
	if _, err := r.Store.IntrospectRunToken(context.Background(), bearerToken(first)); err != nil {
		t.Fatalf("the serving process's credential is not live while it holds the run: %v", err)
	}
	kill9(t, s)

	wk := startChild(t, env, "work", "--dsn", r.DSN, lease, "--workers", "1")
	r.WaitStatus(t, w.id, runtime.StatusCompleted, 40*time.Second)
	terminate(t, wk, 15*time.Second)

	h.mu.Lock()
	if h.calls < 2 {
		t.Errorf("the orders server listed orders %d times, want the worker's listing too (its credential introspected live)", h.calls)
	}
	h.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	last := bearers[len(bearers)-1]
	if last == first || !runCredentialForm.MatchString(last) {
		t.Fatalf("the worker's calls carried %q, want a new credential, not the dead process's %q", last, first)
	}
	if _, err := r.Store.IntrospectRunToken(context.Background(), bearerToken(first)); !errors.Is(err, runtime.ErrTokenInvalid) {
		t.Errorf("the dead process's credential introspects as %v, want inactive", err)
	}
	tools := 0
	for _, e := range r.Events(t, w.id) {
		if e.Kind == runtime.KindTool {
			tools++
		}
		if strings.Contains(string(e.Payload), "tsr_") {
			t.Errorf("event %d carries a run credential: %s", e.Seq, e.Payload)
		}
	}
	if tools < 2 {
		t.Errorf("%d tool events, want the refund's and the listing's", tools)
	}
	// Neither process logged a credential.
	for _, tok := range []string{bearerToken(first), bearerToken(last)} {
		hexPart := strings.TrimPrefix(tok, "tsr_")
		if strings.Contains(s.stderr.String(), hexPart) || strings.Contains(wk.stderr.String(), hexPart) ||
			strings.Contains(s.stdout.String(), hexPart) || strings.Contains(wk.stdout.String(), hexPart) {
			t.Errorf("a process logged the credential %s…", tok[:8])
		}
	}
	if _, err := r.Store.IntrospectRunToken(context.Background(), bearerToken(last)); !errors.Is(err, runtime.ErrTokenInvalid) {
		t.Errorf("the worker's credential introspects as %v after the run completed, want inactive", err)
	}
}

var runCredentialForm = regexp.MustCompile(`^Bearer tsr_[0-9a-f]{64}$`)

// recordBearer tells note the Authorization header of every request.
func recordBearer(h http.Handler, note func(string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		note(r.Header.Get("Authorization"))
		h.ServeHTTP(w, r)
	})
}

// bearerToken is the credential of an Authorization header.
func bearerToken(header string) string { return strings.TrimPrefix(header, "Bearer ") }

// The demo's tour: user and operator ask the orders agent the same
// question through the API and each gets their own orders, from the
// example orders server serve --demo runs beside itself, which learns who
// asks only by introspecting the run credential at Turnstile.
func TestDemoOrdersAgentAnswersEachWithTheirOwn(t *testing.T) {
	db, dsn := dbtest.New(t)
	addr := freeAddr(t)
	s := startServer(t, addr, childEnv(), "--addr", addr, "--dsn", dsn, "--demo", "--workers", "0")
	st := store.New(db)
	ctx := context.Background()
	for _, c := range []struct{ user, mine, theirs string }{
		{"user", "ORD-1001 for Ada Lovelace", "ORD-1007"},
		{"operator", "ORD-1007 for Margaret Hamilton", "ORD-1001"},
	} {
		u, err := st.UserByName(ctx, c.user)
		if err != nil {
			t.Fatal(err)
		}
		tok, _, err := st.CreateToken(ctx, u.ID, []string{runtime.ScopeRunStart, runtime.ScopeRunRead}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", "http://"+s.addr+"/api/runs",
			strings.NewReader(`{"configuration":"orders-agent","prompt":"What are my orders?"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var answer struct {
			Run struct {
				ID     int64  `json:"id"`
				Status string `json:"status"`
			} `json:"run"`
		}
		err = json.NewDecoder(resp.Body).Decode(&answer)
		resp.Body.Close()
		started := answer.Run
		if err != nil || started.Status != "completed" {
			t.Fatalf("%s: POST /api/runs = %d %+v, %v; want completed", c.user, resp.StatusCode, started, err)
		}
		req, _ = http.NewRequest("GET", fmt.Sprintf("http://%s/api/runs/%d/messages", s.addr, started.ID), nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), c.mine) || strings.Contains(string(body), c.theirs) {
			t.Errorf("%s: messages %s, want %q and not %q", c.user, body, c.mine, c.theirs)
		}
	}
	s.stop(t)
}

// turnstile examplemcp needs its own token before it touches anything.
func TestExampleMCPNeedsItsToken(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"examplemcp", "--dsn", "root@tcp(127.0.0.1:1)/none"},
		func(string) string { return "" }, strings.NewReader(""), &out, &out)
	if err == nil || !strings.Contains(err.Error(), exampleTokenVar) || !strings.Contains(err.Error(), runtime.ScopeIdentityIntrospect) {
		t.Errorf("examplemcp without a token = %v, want it to name %s and the scope", err, exampleTokenVar)
	}
}
