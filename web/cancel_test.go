package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// scriptCancel posts the run page's Cancel form as cancel.js does (Accept:
// application/json) and returns the answer's status and body.
func scriptCancel(t *testing.T, c *client, id int64) (int, map[string]any) {
	t.Helper()
	res, body := c.do(c.postRequest(runPath(id, "/cancel"), url.Values{}, "application/json"))
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("answer %d is not JSON: %v\n%s", res.StatusCode, err, body)
	}
	return res.StatusCode, m
}

// TestRunPageCancelAnswersAScriptWithJSON: the Cancel form sent by a
// script is answered with the run's status, and its refusals as JSON
// errors with nothing changed: someone else's run does not exist, a
// settled run cannot be cancelled again.
func TestRunPageCancelAnswersAScriptWithJSON(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "refund")
	id := paused.RunID
	before := a.State(t, id)
	status, body := scriptCancel(t, a.signIn(t, "other"), id)
	if e, _ := body["error"].(map[string]any); status != http.StatusNotFound || e["code"] != string(runtime.CodeNotFound) {
		t.Errorf("someone else's cancel = %d %v, want 404 not_found", status, body)
	}
	a.Unchanged(t, id, before)
	owner := a.signIn(t, "owner")
	if status, body := scriptCancel(t, owner, id); status != http.StatusOK || body["status"] != "cancelled" || body["run_id"] != float64(id) {
		t.Errorf("owner's cancel = %d %v, want 200 with the run cancelled", status, body)
	}
	status, body = scriptCancel(t, owner, id)
	if e, _ := body["error"].(map[string]any); status != http.StatusConflict || e["code"] != string(runtime.CodeNotWaiting) {
		t.Errorf("a second cancel = %d %v, want 409 not_waiting", status, body)
	}
}

// slowRefundYAML pauses on a refund whose payment provider takes 30 s.
const slowRefundYAML = `
identifier: slowrefund
name: Slow refund
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}", processing_seconds: 30}}]
      - text: "never reached"
tools: [refund_order]
`

// TestRunPageShowsAWriteACancelCutShort: a refund cancelled while its
// payment provider works shows on the run page as interrupted, its effect
// unknown, and is never made.
func TestRunPageShowsAWriteACancelCutShort(t *testing.T) {
	a := newAppWith(t, 0, appEngine{configs: []string{slowRefundYAML}})
	paused, order := a.Waiting(t, "slowrefund")
	c, err := a.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: a.Users["admin"].Actor(), Path: runtime.PathRequest})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan runtime.Outcome, 1)
	go func() { done <- c.Run(context.Background(), nil) }()
	a.WaitRun(t, paused.RunID, 10*time.Second, "the refund in flight", func(r *runtime.Run) bool { return r.PendingEffect != "" })
	owner := a.signIn(t, "owner")
	if status, body := scriptCancel(t, owner, paused.RunID); status != http.StatusOK || body["status"] != "cancelled" {
		t.Fatalf("cancel = %d %v, want the run cancelled", status, body)
	}
	if out := <-done; out.Status != runtime.StatusCancelled {
		t.Fatalf("the continuation ended %s, want cancelled", out.Status)
	}
	_, page := owner.get(runPath(paused.RunID, ""))
	if !strings.Contains(page, `data-testid="step-interrupted"`) {
		t.Errorf("the run page does not show the refund as interrupted:\n%s", page)
	}
	if n := a.Refunds(t, order); n != 0 {
		t.Errorf("order %s refunded %d times, want 0", order, n)
	}
}
