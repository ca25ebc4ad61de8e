package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestAPIBadInput: every malformed or refused request body gets its status,
// a code and a message that says what to change, and writes nothing: not
// to the run it aims at, not a decision, not a run.
func TestAPIBadInput(t *testing.T) {
	a := newApp(t, 0)
	approval := a.start(t, "refund", "owner", runtime.OriginInteractive)
	input := a.start(t, "input", "owner", runtime.OriginInteractive)
	d, id := approval.Digest, approval.RunID
	decisions, answers := runPathAPI(id, "/decisions"), runPathAPI(input.RunID, "/input")
	other := strings.Repeat("0", 64)
	big := `{"turn_digest":"` + d + `","decision":"approve","reason":"` + strings.Repeat("a", 1<<20) + `"}`

	tests := []struct {
		name, path, body string
		wantStatus       int
		wantCode         string
		wantMessage      string // part of the message
	}{
		{"truncated JSON", decisions, `{"turn_digest":`, 400, "invalid_request", "ends too early"},
		{"malformed JSON", decisions, `{"turn_digest" "x"}`, 400, "invalid_request", "malformed JSON at byte"},
		{"unknown field", decisions, `{"turn_digest":"` + d + `","decision":"approve","approved":true}`, 400, "invalid_request", `unknown field "approved"`},
		{"trailing object", decisions, `{"turn_digest":"` + d + `","decision":"approve"} {}`, 400, "invalid_request", "data after"},
		{"trailing garbage", decisions, `{"turn_digest":"` + d + `","decision":"approve"}x`, 400, "invalid_request", "data after"},
		{"decision of the wrong type", decisions, `{"turn_digest":"` + d + `","decision":1}`, 400, "invalid_request", `"decision" must be a string, not number`},
		{"digest of the wrong type", decisions, `{"turn_digest":42,"decision":"approve"}`, 400, "invalid_request", `"turn_digest" must be a string`},
		{"empty body", decisions, ``, 400, "invalid_request", "empty"},
		{"null", decisions, `null`, 400, "invalid_request", "turn_digest is required"},
		{"array", decisions, `[]`, 400, "invalid_request", "must be a JSON object, not array"},
		{"string", decisions, `"approve"`, 400, "invalid_request", "must be a JSON object, not string"},
		{"not UTF-8", decisions, "{\"turn_digest\":\"" + d + "\",\"decision\":\"approve\",\"reason\":\"\xff\xfe\"}", 400, "invalid_request", "UTF-8"},
		{"a key given twice", decisions, `{"turn_digest":"` + d + `","decision":"deny","decision":"approve"}`, 400, "invalid_request", "decision is given twice"},
		{"a key given in another case", decisions, `{"Turn_Digest":"` + d + `","decision":"approve"}`, 400, "invalid_request", `unknown field "Turn_Digest"`},
		{"missing digest", decisions, `{"decision":"approve"}`, 400, "invalid_request", "turn_digest is required"},
		{"malformed digest", decisions, `{"turn_digest":"abc","decision":"approve"}`, 400, "invalid_request", "64 lowercase hex"},
		{"upper-case digest", decisions, `{"turn_digest":"` + strings.ToUpper(d) + `","decision":"approve"}`, 400, "invalid_request", "64 lowercase hex"},
		{"missing decision", decisions, `{"turn_digest":"` + d + `"}`, 400, "invalid_request", "approve or deny"},
		{"unknown decision", decisions, `{"turn_digest":"` + d + `","decision":"maybe"}`, 400, "invalid_request", "approve or deny"},
		{"unknown scope", decisions, `{"turn_digest":"` + d + `","decision":"approve","scope":"forever"}`, 400, "invalid_request", "once or session"},
		{"reason too long", decisions, `{"turn_digest":"` + d + `","decision":"deny","reason":"` + strings.Repeat("a", 2001) + `"}`, 400, "invalid_request", "at most 2000"},
		{"body over 1 MiB", decisions, big, 413, "body_too_large", "larger than"},
		{"stale digest", decisions, `{"turn_digest":"` + other + `","decision":"approve"}`, 409, "stale_turn", "changed"},
		{"unknown run", runPathAPI(id+1000, "/decisions"), `{"turn_digest":"` + d + `","decision":"approve"}`, 404, "not_found", "no run"},
		{"malformed run id", "/api/runs/abc/decisions", `{"turn_digest":"` + d + `","decision":"approve"}`, 404, "not_found", "positive integers"},
		{"run id with a plus sign", fmt.Sprintf("/api/runs/+%d/decisions", id), `{"turn_digest":"` + d + `","decision":"approve"}`, 404, "not_found", "positive integers"},
		{"run id with a leading zero", fmt.Sprintf("/api/runs/0%d/decisions", id), `{"turn_digest":"` + d + `","decision":"approve"}`, 404, "not_found", "positive integers"},
		{"approval of an input turn", runPathAPI(input.RunID, "/decisions"), `{"turn_digest":"` + input.Digest + `","decision":"approve"}`, 409, "not_waiting", "not waiting_for_approval"},

		{"missing input", answers, `{"turn_digest":"` + input.Digest + `"}`, 400, "invalid_request", "input is required"},
		{"null input", answers, `{"turn_digest":"` + input.Digest + `","input":null}`, 400, "invalid_request", "input is required"},
		{"input not an object", answers, `{"turn_digest":"` + input.Digest + `","input":[250]}`, 400, "invalid_request", "JSON object"},
		{"input against the schema", answers, `{"turn_digest":"` + input.Digest + `","input":{"amount":"lots"}}`, 422, "invalid_input", "does not fit"},
		{"input with a key given twice", answers, `{"turn_digest":"` + input.Digest + `","input":{"amount":-999999,"note":"x","amount":5}}`, 400, "invalid_request", "input.amount is given twice"},
		{"input given twice", answers, `{"turn_digest":"` + input.Digest + `","input":{"amount":5},"input":{"amount":-5}}`, 400, "invalid_request", "input is given twice"},
		{"input key in another case", answers, `{"turn_digest":"` + input.Digest + `","Input":{"amount":5}}`, 400, "invalid_request", `unknown field "Input"`},
		{"input number beyond float64", answers, `{"turn_digest":"` + input.Digest + `","input":{"amount":1e400}}`, 422, "invalid_input", "out of range"},
		{"input integer beyond int64", answers, `{"turn_digest":"` + input.Digest + `","input":{"amount":99999999999999999999}}`, 422, "invalid_input", "out of range"},
		{"input with an unknown body field", answers, `{"turn_digest":"` + input.Digest + `","input":{"amount":1},"note":"x"}`, 400, "invalid_request", `unknown field "note"`},
		{"input missing its digest", answers, `{"input":{"amount":250}}`, 400, "invalid_request", "turn_digest is required"},
		{"input to an approval turn", runPathAPI(id, "/input"), `{"turn_digest":"` + d + `","input":{"amount":250}}`, 409, "not_waiting", "not waiting_for_input"},

		{"start without a configuration", "/api/runs", `{"prompt":"Refund X-1"}`, 400, "invalid_request", "configuration is required"},
		{"start of an unknown configuration", "/api/runs", `{"configuration":"nope","prompt":"Refund X-1"}`, 404, "not_found", `no configuration "nope"`},
		{"start with an empty prompt", "/api/runs", `{"configuration":"refund","prompt":"  "}`, 400, "invalid_request", "prompt is empty"},
		{"start with an unknown origin", "/api/runs", `{"configuration":"refund","prompt":"x","origin":"robot"}`, 400, "invalid_request", "interactive or process"},
		{"start with async of the wrong type", "/api/runs", `{"configuration":"refund","prompt":"x","async":"yes"}`, 400, "invalid_request", `"async" must be a boolean, not string`},
		{"start with an unknown field", "/api/runs", `{"configuration":"refund","prompt":"x","model":"gpt"}`, 400, "invalid_request", `unknown field "model"`},
		{"start over 1 MiB", "/api/runs", `{"configuration":"refund","prompt":"` + strings.Repeat("a", 1<<20) + `"}`, 413, "body_too_large", "larger than"},
	}
	admin := a.bearer(t, "admin", "run:start", "run:decide")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			beforeApproval, beforeInput := a.State(t, id), a.State(t, input.RunID)
			runs := a.Count(t, `SELECT COUNT(*) FROM runs`)
			got := admin.call(t, a, http.MethodPost, tt.path, tt.body, nil)
			e := got.wantError(t, tt.wantStatus, tt.wantCode)
			if msg, _ := e["message"].(string); !strings.Contains(msg, tt.wantMessage) {
				t.Errorf("message = %q, want it to say %q", msg, tt.wantMessage)
			}
			switch tt.wantCode {
			case "stale_turn":
				if e["turn_digest"] != d {
					t.Errorf("stale_turn carries turn_digest %v, want the current %s", e["turn_digest"], d)
				}
			case "invalid_input":
				if f, _ := e["fields"].(map[string]any); f["amount"] == nil {
					t.Errorf("invalid_input fields = %v, want a message for amount", e["fields"])
				}
			}
			a.Unchanged(t, id, beforeApproval)
			a.Unchanged(t, input.RunID, beforeInput)
			if n := a.Count(t, `SELECT COUNT(*) FROM runs`); n != runs {
				t.Errorf("%d runs after a refused request, want %d", n, runs)
			}
		})
	}
}

// TestAPIRefusals: the decision pipeline's refusals through the API carry
// the statuses of the refusal table and write nothing.
func TestAPIRefusals(t *testing.T) {
	a := newApp(t, 0)
	fourEyes := a.start(t, "four-eyes", "owner", runtime.OriginInteractive)
	granted := a.start(t, "granted", "owner", runtime.OriginInteractive)
	mine := a.start(t, "refund", "admin", runtime.OriginInteractive)
	process := a.start(t, "refund", "owner", runtime.OriginProcess)

	tests := []struct {
		name, user string
		run        runtime.Outcome
		decision   string
		wantStatus int
		wantCode   string
	}{
		{"four eyes", "owner", fourEyes, "approve", 403, "four_eyes"},
		{"grant missing", "approver", granted, "approve", 403, "approver_not_permitted"},
		{"a stranger, as for a run that does not exist", "other", mine, "approve", 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := a.State(t, tt.run.RunID)
			got := a.bearer(t, tt.user, "run:decide").call(t, a, http.MethodPost, runPathAPI(tt.run.RunID, "/decisions"),
				`{"turn_digest":"`+tt.run.Digest+`","decision":"`+tt.decision+`"}`, nil)
			got.wantError(t, tt.wantStatus, tt.wantCode)
			a.Unchanged(t, tt.run.RunID, before)
		})
	}

	// A process run is the API's to decide: it is refused only in the inbox.
	got := a.bearer(t, "owner", "run:decide").call(t, a, http.MethodPost, runPathAPI(process.RunID, "/decisions"),
		`{"turn_digest":"`+process.Digest+`","decision":"deny","reason":"no"}`, nil)
	body := got.wantKeys(t, http.StatusOK, "steps", "outcome")
	if out := body["outcome"].(map[string]any); out["type"] == nil {
		t.Errorf("outcome = %v", out)
	}
	// The same turn again: it was decided, and the answer says by whom,
	// how, and how the run stands.
	again := a.bearer(t, "owner", "run:decide").call(t, a, http.MethodPost, runPathAPI(process.RunID, "/decisions"),
		`{"turn_digest":"`+process.Digest+`","decision":"deny"}`, nil)
	m := again.object(t)
	if again.status != http.StatusConflict {
		t.Errorf("status = %d, want 409: %s", again.status, again.body)
	}
	if e, _ := m["error"].(map[string]any); e["code"] != "already_resuming" {
		t.Errorf("error = %v, want already_resuming", m["error"])
	}
	if d, _ := m["decision"].(map[string]any); d["by"] != "owner" || d["kind"] != "deny" || d["reason"] != "no" {
		t.Errorf("decision = %v, want the owner's denial with its reason (the owner may read the run)", m["decision"])
	}
	if m["status"] != string(runtime.StatusCompleted) {
		t.Errorf("status = %v, want completed", m["status"])
	}
}
