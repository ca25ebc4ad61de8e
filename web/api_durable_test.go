package web_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/web"
)

// On the durable path the API records the decision and answers 202 at
// once; a decider with only the approve grant learns no more of the run
// than that.
func TestAPIDurableDecisionAnswers202(t *testing.T) {
	a := newApp(t, 0, func(d *web.Deps) { d.DecisionPath = web.PathDurable })
	paused, _ := a.Waiting(t, "refund")
	body := fmt.Sprintf(`{"turn_digest":%q,"decision":"approve"}`, paused.Digest)
	got := a.bearer(t, "approver", "run:decide").call(t, a, http.MethodPost,
		fmt.Sprintf("/api/runs/%d/decisions", paused.RunID), body, nil)
	if got.status != http.StatusAccepted {
		t.Fatalf("status = %d, want 202; body %s", got.status, got.body)
	}
	m := got.object(t)
	run, _ := m["run"].(map[string]any)
	if m["path"] != "durable" || run["status"] != "decided" || run["id"] != float64(paused.RunID) || len(run) != 2 {
		t.Errorf("body = %s, want the run's id and status decided, nothing more", got.body)
	}
	if r := a.Run(t, paused.RunID); r.Status != runtime.StatusDecided {
		t.Errorf("run is %s, want decided", r.Status)
	}
}
