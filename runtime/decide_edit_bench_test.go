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
	ctx := context.Background()
	var plain, edited time.Duration
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
		one, _ := f.Waiting(b, "pause")
		two, order := f.Waiting(b, "pause")
		b.StartTimer()
		plain += decide(runtime.DecideRequest{RunID: one.RunID, Digest: one.Digest, Decision: runtime.DecisionApprove,
			Actor: f.approver, Path: runtime.PathDurable})
		edited += decide(runtime.DecideRequest{RunID: two.RunID, Digest: two.Digest, Decision: runtime.DecisionApprove,
			Actor: f.approver, Path: runtime.PathDurable,
			Arguments: map[string]json.RawMessage{two.Pending.Calls[0].ID: json.RawMessage(
				fmt.Sprintf(`{"order_id":%q,"amount_cents":100,"reason":"edited"}`, order))}})
		n++
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(plain.Nanoseconds())/float64(n), "ns/as-offered")
	b.ReportMetric(float64(edited.Nanoseconds())/float64(n), "ns/edited")
	b.ReportMetric(float64(edited)/float64(plain), "edited/as-offered")
}
