package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp/examplemcp"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

var runCredential = regexp.MustCompile(`^Bearer tsr_[0-9a-f]{64}$`)

// forwardYAML asks the example server for the owner's orders and reads
// the shop, which forwards nothing, in the same round.
const forwardYAML = `
identifier: forward
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: orders__my_orders
            arguments: {}
          - name: srv__lookup
            arguments: {order_id: "A-1"}
      - text: "Done."
mcp_servers:
  - name: orders
    url: ${ORDERS_URL}
    identity: forward
    requires_approval: false
  - name: srv
    url: ${MCP_URL}
    requires_approval: false
`

// ordersOf is the example server's data in these tests.
type ordersOf map[string][]examplemcp.Order

func (o ordersOf) OrdersOf(_ context.Context, owner string) ([]examplemcp.Order, error) {
	return o[owner], nil
}

// introspector asks the store, as Turnstile's introspection does, and
// notes every credential it was asked about.
type introspector struct {
	direct examplemcp.Direct
	mu     sync.Mutex
	seen   []string
}

func (in *introspector) Introspect(ctx context.Context, token string) (examplemcp.Identity, error) {
	in.mu.Lock()
	in.seen = append(in.seen, token)
	in.mu.Unlock()
	return in.direct.Introspect(ctx, token)
}

func (in *introspector) tokens() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.seen...)
}

// forwardFixture is a world with the shop and the example orders server.
func forwardFixture(t *testing.T, yamls ...string) (*fixture, *introspector) {
	t.Helper()
	s := newShop(t)
	in := &introspector{}
	orders := httptest.NewServer(examplemcp.Handler(in, ordersOf{
		"owner": {{ID: "ORD-1", Customer: "Ada", AmountCents: 1250, Currency: "EUR"}},
		"other": {{ID: "ORD-2", Customer: "Bob", AmountCents: 990, Currency: "EUR"}},
	}))
	t.Cleanup(orders.Close)
	src := mcp.NewSource(mcp.Options{Getenv: func(n string) string {
		if n == "ORDERS_URL" {
			return orders.URL
		}
		return s.env(n)
	}})
	t.Cleanup(func() { src.Close() })
	w := testrig.New(t, testrig.Configs(yamls...), testrig.Engine(runtime.Options{Source: src}))
	in.direct = w.Store.IntrospectRunToken
	return &fixture{World: w, src: src, shop: s}, in
}

func TestForwardActsAsTheOwnerAndRevokesAtTheEnd(t *testing.T) {
	f, in := forwardFixture(t, forwardYAML)
	for _, c := range []struct{ owner, mine, theirs string }{
		{"owner", "ORD-1 for Ada", "ORD-2"},
		{"other", "ORD-2 for Bob", "ORD-1"},
	} {
		out, _ := f.Start(t, testrig.Launch{Configuration: "forward", Owner: c.owner, Prompt: "What are my orders?"})
		completed(t, out)
		res := f.results(t, out.RunID)
		if len(res) != 2 || res[0].IsError || !strings.Contains(res[0].Content, c.mine) || strings.Contains(res[0].Content, c.theirs) {
			t.Errorf("%s: results = %+v, want %q and not %q", c.owner, res, c.mine, c.theirs)
		}
	}
	seen := in.tokens()
	if len(seen) == 0 {
		t.Fatal("the orders server was never sent a credential")
	}
	for _, tok := range seen {
		if !runCredential.MatchString("Bearer " + tok) {
			t.Errorf("credential %q is not tsr_ and 64 hex digits", tok)
		}
		if _, err := f.Store.IntrospectRunToken(context.Background(), tok); !errors.Is(err, runtime.ErrTokenInvalid) {
			t.Errorf("a settled run's credential introspects as %v, want inactive", err)
		}
	}
	// The shop forwards nothing: none of its requests carried one.
	for _, h := range f.shop.headers() {
		if strings.Contains(h, "tsr_") {
			t.Errorf("the shop was sent %q", h)
		}
	}
}

// refuseYAML reads and writes a forwarding shop.
const refuseYAML = `
identifier: refuse
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: srv__lookup
            arguments: {order_id: "A-1"}
      - tool_calls:
          - name: srv__charge
            arguments: {order_id: "A-1", amount_cents: 100}
      - text: "Done."
mcp_servers:
  - name: srv
    url: ${MCP_URL}
    identity: forward
    requires_approval: false
`

func TestUnauthorizedMintsOnceAndRepeatsOnlyReads(t *testing.T) {
	f := newFixture(t, refuseYAML)
	f.shop.mu.Lock()
	f.shop.refuse = "lookup"
	f.shop.mu.Unlock()
	out := f.start(t, "refuse")
	completed(t, out)
	res := f.results(t, out.RunID)
	if len(res) != 2 || res[0].IsError || !strings.Contains(res[0].Content, "order A-1: open") {
		t.Fatalf("results = %+v, want the read repeated with a new credential", res)
	}
	if got := f.shop.lookups.Load(); got != 1 {
		t.Errorf("lookups = %d, want 1 (the refused one never ran)", got)
	}
	var bearers []string
	for _, h := range f.shop.headers() {
		if !runCredential.MatchString(h) {
			t.Fatalf("the forwarding shop was sent Authorization %q", h)
		}
		if len(bearers) == 0 || bearers[len(bearers)-1] != h {
			bearers = append(bearers, h)
		}
	}
	if len(bearers) != 2 {
		t.Errorf("the shop saw %d credentials in turn, want 2 (one minted after the 401)", len(bearers))
	}

	// A write refused is not repeated: its result says so.
	f.shop.mu.Lock()
	f.shop.refuse = "charge"
	f.shop.mu.Unlock()
	out = f.start(t, "refuse")
	completed(t, out)
	res = f.results(t, out.RunID)
	if len(res) != 2 || !res[1].IsError || !strings.Contains(res[1].Content, "not repeated") {
		t.Errorf("results = %+v, want the charge refused and not repeated", res)
	}
	if got := f.shop.charges.Load(); got != 1 {
		t.Errorf("charges = %d, want 1 (the first run's)", got)
	}
	if got := f.shop.answered(http.StatusUnauthorized); got != 2 {
		t.Errorf("401 answers = %d, want 2", got)
	}
}

func TestForwardWithoutCredentialIsUnavailable(t *testing.T) {
	s := newShop(t)
	src := mcp.NewSource(mcp.Options{Getenv: s.env})
	defer src.Close()
	cfg := &runtime.Configuration{Identifier: "x", MCPServers: []runtime.MCPServer{{Name: "srv", URL: s.ts.URL, Identity: runtime.IdentityForward}}}
	_, err := src.Tools(context.Background(), cfg)
	var u *runtime.UnavailableError
	if !errors.As(err, &u) || !strings.Contains(u.Cause, "no credential") {
		t.Fatalf("Tools without a credential = %v, want the server unavailable for want of one", err)
	}
	if n := len(s.headers()); n != 0 {
		t.Errorf("the server was sent %d requests without a credential, want none", n)
	}
}

// While a continuation holds its run, the lease keeper slides the run's
// credential on its own timer.
func TestHeldRunsCredentialSlides(t *testing.T) {
	s := newShop(t)
	src := mcp.NewSource(mcp.Options{Getenv: s.env})
	t.Cleanup(func() { src.Close() })
	w := testrig.New(t, testrig.Configs(refuseYAML),
		testrig.Engine(runtime.Options{Source: src, Lease: 300 * time.Millisecond, IdentitySlide: 200 * time.Millisecond}))
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	s.mu.Unlock()
	done := make(chan runtime.Outcome, 1)
	go func() {
		c, err := w.Engine.Start(context.Background(), runtime.StartRequest{Configuration: "refuse", Prompt: "go", Owner: w.Actor("owner")})
		if err != nil {
			t.Error(err)
			done <- runtime.Outcome{}
			return
		}
		done <- c.Run(context.Background(), nil)
	}()
	expiry := func() (time.Time, bool) {
		var at []time.Time
		if err := w.DB.Select(&at, `SELECT expires_at FROM run_tokens`); err != nil {
			t.Fatal(err)
		}
		if len(at) != 1 {
			return time.Time{}, false
		}
		return at[0], true
	}
	deadline := time.Now().Add(10 * time.Second)
	var first time.Time
	for ok := false; !ok; first, ok = expiry() {
		if time.Now().After(deadline) {
			t.Fatal("no credential was minted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		if at, ok := expiry(); ok && at.After(first) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held run's credential never slid")
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(gate)
	out := <-done
	completed(t, out)
	for _, h := range s.headers() {
		if _, err := w.Store.IntrospectRunToken(context.Background(), strings.TrimPrefix(h, "Bearer ")); !errors.Is(err, runtime.ErrTokenInvalid) {
			t.Errorf("the credential outlived the continuation: %v", err)
		}
	}
}

// forwardEditYAML pauses on a forwarding server's write.
const forwardEditYAML = `
identifier: forward-edit
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: srv__charge
            arguments: {order_id: "A-1", amount_cents: 100}
      - text: "Done."
mcp_servers:
  - name: srv
    url: ${MCP_URL}
    identity: forward
`

// A decision that edits a call of a forwarding server's tool has no run
// credential to list the tools with: it checks the edit against the
// schema the run's continuation listed, and the continuation that carries
// the decision out calls the server with a credential of its own.
func TestEditOfAForwardingServersCall(t *testing.T) {
	f := newFixture(t, forwardEditYAML)
	paused := f.start(t, "forward-edit")
	waitingOn(t, paused, "srv__charge")
	id := paused.Pending.Calls[0].ID
	_, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.Actor("approver"),
		Arguments: map[string]json.RawMessage{id: json.RawMessage(`{"order_id":"A-1","amount_cents":"lots"}`)}})
	var ref *runtime.Refusal
	if !errors.As(err, &ref) || ref.Code != runtime.CodeInvalidInput || ref.Fields["arguments."+id+".amount_cents"] == "" {
		t.Fatalf("an amount that is text: %v, want invalid_input on the amount (the schema checked)", err)
	}
	out := f.Decide(t, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Arguments: map[string]json.RawMessage{id: json.RawMessage(`{"order_id":"A-1","amount_cents":900}`)}})
	completed(t, out)
	if res := f.results(t, out.RunID); len(res) != 1 || res[0].Content != "charged A-1 900 cents (charge #1)" {
		t.Errorf("tool results = %+v, want the charge of the edited 900 cents", res)
	}
	for _, h := range f.shop.headers() {
		if !runCredential.MatchString(h) {
			t.Errorf("the forwarding server was sent Authorization %q", h)
		}
	}
}

// countingMints counts the credentials minted by a statement of their own.
type countingMints struct {
	runtime.CredentialStore
	n atomic.Int32
}

func (c *countingMints) MintRunToken(ctx context.Context, runID, ownerID int64, claimedBy string, ttl time.Duration) (string, error) {
	c.n.Add(1)
	return c.CredentialStore.MintRunToken(ctx, runID, ownerID, claimedBy, ttl)
}

// TestTheCommitThatStartsAContinuationMintsItsCredential: the commit
// that starts a continuation in a request mints its credential — a
// start's, a decision's claim (the row is there, under the claim's
// holder, before the continuation runs), a follow-up's turn —, and each
// continuation calls the forwarding server with it, minting none of its
// own.
func TestTheCommitThatStartsAContinuationMintsItsCredential(t *testing.T) {
	f := newFixture(t, forwardEditYAML)
	mints := &countingMints{CredentialStore: f.Store}
	e := f.NewEngine(runtime.Options{Source: f.src, Credentials: mints})
	ctx := context.Background()
	owner := f.Actor("owner")
	heldBy := func(runID int64) string {
		t.Helper()
		var holder string
		if err := f.DB.Get(&holder, `SELECT claimed_by FROM run_tokens WHERE run_id = ?`, runID); err != nil {
			t.Fatalf("no credential of run %d: %v", runID, err)
		}
		return holder
	}

	c, err := e.Start(ctx, runtime.StartRequest{Configuration: "forward-edit", Prompt: "charge it", Owner: owner,
		Origin: runtime.OriginInteractive})
	if err != nil {
		t.Fatal(err)
	}
	paused := c.Run(ctx, nil)
	waitingOn(t, paused, "srv__charge")
	c, err = e.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.Actor("approver")})
	if err != nil {
		t.Fatal(err)
	}
	if run := f.Run(t, paused.RunID); heldBy(paused.RunID) != run.ClaimedBy || run.ClaimedBy == "" {
		t.Errorf("after the claim the credential acts under %q, want the claim's %q", heldBy(paused.RunID), run.ClaimedBy)
	}
	completed(t, c.Run(ctx, nil))
	c, err = e.SendMessage(ctx, runtime.MessageRequest{RunID: paused.RunID, Content: "once more", Actor: owner})
	if err != nil {
		t.Fatal(err)
	}
	waitingOn(t, c.Run(ctx, nil), "srv__charge")
	if n := mints.n.Load(); n != 0 {
		t.Errorf("the continuations minted %d credentials with statements of their own, want none", n)
	}
	headers := f.shop.headers()
	if len(headers) < 3 {
		t.Fatalf("the forwarding server was called %d times, want at least one a continuation", len(headers))
	}
	for _, h := range headers {
		if !runCredential.MatchString(h) {
			t.Errorf("the forwarding server was sent Authorization %q", h)
		}
	}
}
