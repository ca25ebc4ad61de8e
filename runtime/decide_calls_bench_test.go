package runtime_test

import (
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// pairYAML pauses at once on two calls, a lookup and a refund.
const pairYAML = `
identifier: pair
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - {name: lookup_order, arguments: {order_id: "${order_id}"}}
          - {name: refund_order, arguments: {order_id: "${order_id}"}}
      - text: "Done."
tools: [lookup_order, refund_order]
tool_policies:
  lookup_order: {requires_approval: true}
`

// BenchmarkCallByCallDecision is what deciding call by call adds to a
// decision: one durable approval of a two-call turn as a whole, and one
// approving the lookup and denying the refund (the choices checked
// against the turn, encoded and sealed with the decision), interleaved so
// that both meet the same load. Only the two Decide calls are timed.
func BenchmarkCallByCallDecision(b *testing.B) {
	f := newFixture(b, 0, pairYAML)
	interleavedDecisions(b, f, "pair", "whole-turn", "per-call", func(one, two runtime.Outcome, _ string) (runtime.DecideRequest, runtime.DecideRequest) {
		return runtime.DecideRequest{RunID: one.RunID, Digest: one.Digest, Decision: runtime.DecisionApprove,
				Actor: f.approver, Path: runtime.PathDurable},
			runtime.DecideRequest{RunID: two.RunID, Digest: two.Digest, Actor: f.approver,
				Path: runtime.PathDurable, Calls: map[string]runtime.CallDecision{
					two.Pending.Calls[0].ID: {Decision: runtime.DecisionApprove},
					two.Pending.Calls[1].ID: {Decision: runtime.DecisionDeny, Reason: "not eligible"}}}
	})
}
