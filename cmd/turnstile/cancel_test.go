package main

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
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

// cancels is how many cancels TestCancelLatency makes: a few in the
// suite, 100 for README's figure (go test -run TestCancelLatency
// ./cmd/turnstile/ -args -cancels 100 -v).
var cancels = flag.Int("cancels", 10, "cancels TestCancelLatency makes, half through the holding process, half through another")

// TestCancelLatency: runs inside a 60-second tool call, each streamed by
// the holding serve process, are cancelled one after another, half through
// the holder and half through a second serve process on the same
// database, each 0 to 500 ms into the call. From the DELETE sent, it times the run seen settled (a poll
// every 2 ms) and the holder's stream's "cancelled" line; every one must
// be within a second. -v logs the p50/p99 table of README's Figures.
func TestCancelLatency(t *testing.T) {
	r := newRig(t, sleepyYAML)
	holder, other := startServe(t, r.DSN), startServe(t, r.DSN)
	owner := newAPIClient(t, r, holder, r.owner, "run:start", "run:read")
	through := map[string]*apiClient{
		"holding process": newAPIClient(t, r, holder, r.owner, "run:cancel"),
		"another process": newAPIClient(t, r, other, r.owner, "run:cancel"),
	}
	settled, lines := map[string][]time.Duration{}, map[string][]time.Duration{}
	for i := range *cancels {
		where := "holding process"
		if i%2 == 1 {
			where = "another process"
		}
		s := owner.stream(t, http.MethodPost, "/api/runs", map[string]string{"configuration": "sleepy", "prompt": "go"})
		s.WaitFor(t, 10*time.Second, "the model's round", func(l testrig.Line) bool {
			step, _ := l.Value["step"].(map[string]any)
			return l.Type() == "step" && step["kind"] == string(runtime.KindLLM)
		})
		var id int64
		if err := r.DB.Get(&id, `SELECT MAX(id) FROM runs`); err != nil {
			t.Fatal(err)
		}
		// A person cancels at any moment of the call, not in step with
		// the holder's poll, which started with the run: the cancel comes
		// 0 to 500 ms into the call.
		time.Sleep(time.Duration(rand.Int64N(int64(500 * time.Millisecond))))
		sent := cancelAt(t, through[where], id)
		for r.Count(t, `SELECT COUNT(*) FROM runs WHERE id = ? AND status = 'cancelled'`, id) == 0 {
			if time.Since(sent) > 10*time.Second {
				t.Fatalf("run %d not cancelled 10 s after the cancel through the %s", id, where)
			}
			time.Sleep(2 * time.Millisecond) // the measurement's resolution, not a synchronisation
		}
		settled[where] = append(settled[where], time.Since(sent))
		last := s.WaitFor(t, 10*time.Second, "the last line", func(l testrig.Line) bool {
			return l.Type() != "step" && l.Type() != "keepalive"
		})
		s.Close()
		if last.Type() != "cancelled" {
			t.Fatalf("run %d's stream ended with %s, want cancelled", id, last)
		}
		lines[where] = append(lines[where], last.Arrived.Sub(sent))
	}
	t.Logf("| cancel through | n | run settled p50 | p99 | stream's cancelled line p50 | p99 |")
	t.Logf("|---|---|---|---|---|---|")
	for _, where := range []string{"holding process", "another process"} {
		s, l := slices.Sorted(slices.Values(settled[where])), slices.Sorted(slices.Values(lines[where]))
		if len(s) == 0 {
			continue
		}
		t.Logf("| %s | %d | %s | %s | %s | %s |", where, len(s), nearestRank(s, 50), nearestRank(s, 99), nearestRank(l, 50), nearestRank(l, 99))
		if worst := max(s[len(s)-1], l[len(l)-1]); worst > time.Second {
			t.Errorf("a cancel through the %s took %s, want every one within 1s", where, worst)
		}
	}
}

// nearestRank is the nearest-rank percentile p of sorted durations, to
// the tenth of a millisecond.
func nearestRank(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted)+99)/100 - 1
	return sorted[max(i, 0)].Round(100 * time.Microsecond)
}
