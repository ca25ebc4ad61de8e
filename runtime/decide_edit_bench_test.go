package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// pauseYAML pauses at once on refund_order.
const pauseYAML = `
identifier: pause
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

// BenchmarkEditedDecision is what checking an edit adds to a decision:
// one durable approval (the checks, the claim) as offered, and one with
// the call's arguments edited (read strictly, checked against the tool's
// schema, stored with the decision), interleaved so that both meet the
// same load. Only the two Decide calls are timed.
func BenchmarkEditedDecision(b *testing.B) {
	f := newFixture(b, 0, pauseYAML)
	interleavedDecisions(b, f, "pause", "as-offered", "edited", func(one, two runtime.Outcome, order string) (runtime.DecideRequest, runtime.DecideRequest) {
		return runtime.DecideRequest{RunID: one.RunID, Digest: one.Digest, Decision: runtime.DecisionApprove,
				Actor: f.approver, Path: runtime.PathDurable},
			runtime.DecideRequest{RunID: two.RunID, Digest: two.Digest, Decision: runtime.DecisionApprove,
				Actor: f.approver, Path: runtime.PathDurable,
				Arguments: map[string]json.RawMessage{two.Pending.Calls[0].ID: json.RawMessage(
					fmt.Sprintf(`{"order_id":%q,"amount_cents":100,"reason":"edited"}`, order))}}
	})
}

// interleavedDecisions times two kinds of durable decision of runs of
// configuration cfg that pause at once, one of each per iteration (reqs
// makes both, from the two paused runs and the second's order) so that
// both meet the same load, and reports each one's time as ns/<name> and
// the second's over the first's. Only the two Decide calls are timed.
func interleavedDecisions(b *testing.B, f *fixture, cfg, first, second string,
	reqs func(one, two runtime.Outcome, order string) (runtime.DecideRequest, runtime.DecideRequest)) {
	ctx := context.Background()
	var took [2]time.Duration
	decide := func(req runtime.DecideRequest) time.Duration {
		start := time.Now()
		if c, err := f.Engine.Decide(ctx, req); c != nil || err != nil {
			b.Fatalf("decide = %v, %v", c, err)
		}
		return time.Since(start)
	}
	n := 0
	for b.Loop() {
		b.StopTimer()
		one, _ := f.Waiting(b, cfg)
		two, order := f.Waiting(b, cfg)
		a, z := reqs(one, two, order)
		b.StartTimer()
		took[0] += decide(a)
		took[1] += decide(z)
		n++
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(n), "ns/"+first)
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(n), "ns/"+second)
	b.ReportMetric(float64(took[1])/float64(took[0]), second+"/"+first)
}
