package metrics_test

import (
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/metrics"
)

// The engine tells the metrics of every step: that costs no allocation.
func TestMetricsOfAStepAllocateNothing(t *testing.T) {
	m := metrics.New(nil)
	if n := testing.AllocsPerRun(1000, func() {
		m.ContinuationStarted()
		m.StepRecorded(runtime.KindTool, 3*time.Millisecond, time.Millisecond)
		m.ContinuationEnded()
	}); n != 0 {
		t.Errorf("%v allocations per step, want 0", n)
	}
	var none *metrics.Metrics // a server without metrics counts nothing, safely
	none.StepRecorded(runtime.KindLLM, time.Second, time.Millisecond)
	none.ClaimLost(runtime.CodeStaleTurn)
}
