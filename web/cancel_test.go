package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

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
