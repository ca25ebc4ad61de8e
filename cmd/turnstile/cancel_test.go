package main

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// sleepyYAML calls a 60-second read-only tool at once.
const sleepyYAML = `identifier: sleepy
name: sleepy
provider:
  type: scripted
  script:
    rounds:
      - text: "Working."
        tool_calls: [{name: slow_task, arguments: {seconds: 60}}]
      - text: "never reached"
tools: [slow_task]
`

// cancelAt sends DELETE /api/runs/:id through c and returns when it was
// sent; the answer must say the holder was asked (or already settled it).
func cancelAt(t *testing.T, c *apiClient, id int64) time.Time {
	t.Helper()
	sent := time.Now()
	resp, err := c.do(http.MethodDelete, fmt.Sprintf("/api/runs/%d", id), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE /api/runs/%d = %d:\n%s", id, resp.StatusCode, body)
	}
	return sent
}

// settledAfter polls the run until it settled and returns how long after
// sent it was seen settled, as cancelled.
func settledAfter(t *testing.T, r *rig, id int64, sent time.Time) time.Duration {
	t.Helper()
	run := r.WaitRun(t, id, 10*time.Second, "settled", func(r *runtime.Run) bool { return r.Status.Terminal() })
	took := time.Since(sent)
	t.Logf("run %d settled %s after the cancel", id, took)
	if run.Status != runtime.StatusCancelled || run.TerminationReason != runtime.ReasonCancelled || run.PendingEffect != "" {
		t.Errorf("run %d is %s (%q), pending effect %q; want cancelled, none", id, run.Status, run.TerminationReason, run.PendingEffect)
	}
	return took
}

// wantCancelledLine fails the test unless the stream's last line is
// "cancelled", read within a second of the cancel.
func wantCancelledLine(t *testing.T, s *testrig.Stream, sent time.Time) {
	t.Helper()
	last := s.WaitFor(t, 10*time.Second, "the last line", func(l testrig.Line) bool {
		return l.Type() != "step" && l.Type() != "keepalive"
	})
	if last.Type() != "cancelled" {
		t.Errorf("the holder's stream ended with %s, want cancelled", last)
	}
	if took := last.Arrived.Sub(sent); took > time.Second {
		t.Errorf("the holder's stream said cancelled %s after the cancel, want within 1s", took)
	}
}

// TestCancelThroughAnotherServeStopsTheCallNow: two serve processes on
// one database. A run sits in a 60-second tool call on the first; its
// owner cancels it through the second. The holder stops the call within a
// second, its stream ends "cancelled", and the run settles. Then the same
// for an approved refund whose payment provider takes 30 s: the write is
// cut short, recorded as interrupted, never made, never repeated.
func TestCancelThroughAnotherServeStopsTheCallNow(t *testing.T) {
	r := newRig(t, sleepyYAML, pacedYAML("paced", 0, 0, 30))
	holder, other := startServe(t, r.DSN), startServe(t, r.DSN)
	owner := newAPIClient(t, r, holder, r.owner, "run:start", "run:read")
	canceller := newAPIClient(t, r, other, r.owner, "run:cancel")

	t.Run("tool call", func(t *testing.T) {
		s := owner.stream(t, http.MethodPost, "/api/runs", map[string]string{"configuration": "sleepy", "prompt": "go"})
		defer s.Close()
		s.WaitFor(t, 10*time.Second, "the model's round", func(l testrig.Line) bool {
			step, _ := l.Value["step"].(map[string]any)
			return l.Type() == "step" && step["kind"] == string(runtime.KindLLM)
		})
		var id int64
		if err := r.DB.Get(&id, `SELECT id FROM runs WHERE configuration_id = (SELECT id FROM configurations WHERE identifier = 'sleepy')`); err != nil {
			t.Fatal(err)
		}
		sent := cancelAt(t, canceller, id)
		if took := settledAfter(t, r, id, sent); took > time.Second {
			t.Errorf("run %d settled %s after the cancel through the other process, want within 1s", id, took)
		}
		wantCancelledLine(t, s, sent)
	})

	t.Run("write", func(t *testing.T) {
		w := r.waiting(t, "paced")
		operator := newAPIClient(t, r, holder, r.operator, "run:decide")
		s := operator.stream(t, http.MethodPost, fmt.Sprintf("/api/runs/%d/decisions", w.id),
			map[string]string{"turn_digest": w.digest, "decision": "approve"})
		defer s.Close()
		r.WaitRun(t, w.id, 10*time.Second, "the refund in flight", func(run *runtime.Run) bool { return run.PendingEffect != "" })
		sent := cancelAt(t, canceller, w.id)
		if took := settledAfter(t, r, w.id, sent); took > time.Second {
			t.Errorf("run %d settled %s after the cancel through the other process, want within 1s", w.id, took)
		}
		wantCancelledLine(t, s, sent)
		if n := r.Refunds(t, w.order); n != 0 {
			t.Errorf("order %s refunded %d times, want 0: the write was cut short", w.order, n)
		}
		var interrupted bool
		for _, e := range r.Gapless(t, w.id) {
			if e.Kind == runtime.KindTool {
				var p runtime.ToolPayload
				if err := runtime.DecodePayload(e.Payload, &p); err != nil {
					t.Fatal(err)
				}
				interrupted = p.Interrupted && p.IsError
			}
		}
		if !interrupted {
			t.Errorf("run %d's refund is not recorded as interrupted", w.id)
		}
	})
}
