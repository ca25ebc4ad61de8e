package runtime_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
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

// fixture is a world with the tools the benchmarks and the panic test
// add, and the users by role. owner owns the runs; approver holds the
// approve grant; refunder holds approve and refunds; other holds nothing;
// admin is an admin.
type fixture struct {
	*testrig.World
	owner, approver, refunder, other, admin runtime.Actor
}

func newFixture(t testing.TB, lease time.Duration, yamls ...string) *fixture {
	t.Helper()
	w := testrig.New(t, testrig.Configs(yamls...), testrig.Tools(noop{}, panics{}),
		testrig.Engine(runtime.Options{Lease: lease}), testrig.User("refunder", runtime.RoleUser, "approve", "refunds"))
	return &fixture{World: w, owner: w.Actor("owner"), approver: w.Actor("approver"), refunder: w.Actor("refunder"),
		other: w.Actor("other"), admin: w.Actor("admin")}
}

// engine returns another engine on the same database: another process.
func (f *fixture) engine(lease time.Duration) *runtime.Engine {
	return f.NewEngine(runtime.Options{Lease: lease})
}

// start starts a run of a configuration on a new order and runs it until
// it pauses or settles.
func (f *fixture) start(t testing.TB, cfg string, origin runtime.Origin) (runtime.Outcome, string) {
	t.Helper()
	return f.Start(t, testrig.Launch{Configuration: cfg, Origin: origin})
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
