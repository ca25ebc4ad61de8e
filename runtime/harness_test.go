package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// Configurations the tests run. ${order_id} comes from the prompt.
const (
	refundYAML = `
identifier: refund
provider:
  type: scripted
  script:
    rounds:
      - text: "Looking the order up."
        tool_calls:
          - name: lookup_order
            arguments: {order_id: "${order_id}"}
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}", reason: "MARKER-ARGUMENT"}
      - text: "MARKER-ANSWER: refunded."
tools: [lookup_order, refund_order]
`
	twiceYAML = `
identifier: twice
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}", amount_cents: 100}
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}", amount_cents: 200}
      - text: "Two refunds."
tools: [refund_order]
`
	fourEyesYAML = `
identifier: four-eyes
require_second_approver: true
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}"}
      - text: "Done."
tools: [refund_order]
`
	grantYAML = `
identifier: granted
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}"}
      - text: "Done."
tools: [refund_order]
tool_policies:
  refund_order: {grant: refunds}
`
	inputYAML = `
identifier: input
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: ask_operator
            arguments: {question: "How much?"}
      - text: "Thanks."
tools: [ask_operator]
`
	slowYAML = `
identifier: slow
privacy_level: full
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}"}
      - delay: 300ms
        text: "one"
        tool_calls:
          - name: lookup_order
            arguments: {order_id: "${order_id}"}
      - delay: 300ms
        text: "two"
      - text: "never reached"
tools: [lookup_order, refund_order]
`
)

type fixture struct {
	db  *sqlx.DB
	st  *store.Store
	eng *runtime.Engine
	// owner owns the runs; approver holds the approve grant; refunder holds
	// approve and refunds; other holds nothing; admin is an admin.
	owner, approver, refunder, other, admin runtime.Actor
	orders                                  int
	tools                                   map[string]runtime.Tool
}

// engine returns another engine on the same database: another process.
func (f *fixture) engine(lease time.Duration) *runtime.Engine {
	return runtime.New(runtime.Options{Store: f.st, Tools: f.tools, Providers: scripted.Factory,
		Validator: schema.New(), Lease: lease})
}

func newFixture(t testing.TB, lease time.Duration, yamls ...string) *fixture {
	t.Helper()
	db, _ := dbtest.New(t)
	st := store.New(db)
	tools := builtin.Registry(append(builtin.Tools(st), noop{}, panics{})...)
	eng := runtime.New(runtime.Options{Store: st, Tools: tools, Providers: scripted.Factory,
		Validator: schema.New(), Lease: lease})
	f := &fixture{db: db, st: st, eng: eng, tools: tools}
	ctx := context.Background()
	for _, y := range yamls {
		cfg, err := configfile.Parse("test.yaml", []byte(y), func(n string) bool { _, ok := tools[n]; return ok })
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SaveConfiguration(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	user := func(name string, role runtime.Role, grants ...string) runtime.Actor {
		u := &runtime.User{Name: name, Role: role, Grants: grants}
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		return u.Actor()
	}
	f.owner = user("owner", runtime.RoleUser)
	f.approver = user("approver", runtime.RoleUser, "approve")
	f.refunder = user("refunder", runtime.RoleUser, "approve", "refunds")
	f.other = user("other", runtime.RoleUser)
	f.admin = user("admin", runtime.RoleAdmin)
	return f
}

// order creates a fresh order and returns its id.
func (f *fixture) order(t testing.TB) string {
	t.Helper()
	f.orders++
	id := fmt.Sprintf("T-%d", f.orders)
	if err := f.st.CreateDemoOrder(context.Background(), runtime.Order{ID: id, Customer: "Test", AmountCents: 5000, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	return id
}

// start starts a run of a configuration on a new order and runs it until
// it pauses or settles.
func (f *fixture) start(t testing.TB, cfg string, origin runtime.Origin) (runtime.Outcome, string) {
	t.Helper()
	order := f.order(t)
	c, err := f.eng.Start(context.Background(), runtime.StartRequest{Configuration: cfg,
		Prompt: "Please refund " + order, Owner: f.owner, Origin: origin})
	if err != nil {
		t.Fatal(err)
	}
	out := c.Run(context.Background(), nil)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	return out, order
}

// waiting starts a run and requires it to pause.
func (f *fixture) waiting(t testing.TB, cfg string) (runtime.Outcome, string) {
	t.Helper()
	out, order := f.start(t, cfg, runtime.OriginInteractive)
	if !out.Status.Waiting() {
		t.Fatalf("run %d is %s, want it waiting", out.RunID, out.Status)
	}
	return out, order
}

func (f *fixture) refunds(t *testing.T, order string) int {
	t.Helper()
	n, err := f.st.RefundCount(context.Background(), order)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) events(t *testing.T, runID int64) []runtime.Event {
	t.Helper()
	evs, err := f.st.Events(context.Background(), runID, 0)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// snapshot is everything a refusal must leave as it was.
type snapshot struct {
	Run       runtime.Run
	Events    int
	Decisions int
	Standing  int
}

func (f *fixture) snapshot(t *testing.T, runID int64) snapshot {
	t.Helper()
	r, err := f.st.Run(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	s := snapshot{Run: *r}
	for q, dst := range map[string]*int{
		`SELECT COUNT(*) FROM run_events WHERE run_id = ?`:         &s.Events,
		`SELECT COUNT(*) FROM decisions WHERE run_id = ?`:          &s.Decisions,
		`SELECT COUNT(*) FROM standing_approvals WHERE run_id = ?`: &s.Standing,
	} {
		if err := f.db.Get(dst, q, runID); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// decide approves (or denies) a run on the request path and runs the
// continuation.
func (f *fixture) decide(t *testing.T, req runtime.DecideRequest) runtime.Outcome {
	t.Helper()
	if req.Decision == "" {
		req.Decision = runtime.DecisionApprove
	}
	c, err := f.eng.Decide(context.Background(), req)
	if err != nil {
		t.Fatalf("decide run %d: %v", req.RunID, err)
	}
	out := c.Run(context.Background(), nil)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	return out
}

// noop is a read-only tool that costs nothing, so benchmarks measure the
// engine and the store rather than a tool.
type noop struct{}

func (noop) Spec() runtime.ToolSpec {
	return runtime.ToolSpec{Name: "noop", Description: "does nothing", Effect: runtime.ReadOnly,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (noop) Call(context.Context, runtime.Invocation) (string, error) { return "ok", nil }

// panics is a tool whose call panics, as a bug in a tool would.
type panics struct{}

func (panics) Spec() runtime.ToolSpec {
	return runtime.ToolSpec{Name: "panics", Description: "panics", Effect: runtime.ReadOnly,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (panics) Call(context.Context, runtime.Invocation) (string, error) { panic("a bug in a tool") }
