package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// One decision per call: a turn of two calls that both wait for a person
// (a lookup made to need an approval, and a refund that takes the refunds
// grant), decided call by call.
func init() {
	testConfigs = append(testConfigs, `
identifier: percall
name: Per call
privacy_level: full
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - {name: lookup_order, arguments: {order_id: "${order_id}"}}
          - {name: refund_order, arguments: {order_id: "${order_id}", reason: "lost parcel"}}
      - text: "MARKER-ANSWER decided per call"
tools: [lookup_order, refund_order]
tool_policies:
  lookup_order: {requires_approval: true}
  refund_order: {grant: refunds}
`, `
identifier: percall-four-eyes
name: Per call, four eyes
require_second_approver: true
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - {name: lookup_order, arguments: {order_id: "${order_id}"}}
          - {name: refund_order, arguments: {order_id: "${order_id}"}}
      - text: "done"
tools: [lookup_order, refund_order]
tool_policies:
  lookup_order: {requires_approval: true}
`)
}

// twoCalls are the lookup's and the refund's call ids of a paused percall
// run.
func twoCalls(t *testing.T, paused runtime.Outcome) (lookup, refund string) {
	t.Helper()
	if paused.Pending == nil || len(paused.Pending.Calls) != 2 {
		t.Fatalf("the run waits on %+v, want two calls", paused.Pending)
	}
	return paused.Pending.Calls[0].ID, paused.Pending.Calls[1].ID
}

// toolResults are the tool messages of a run's conversation by call id:
// what the model was given as each call's result.
func (a *testApp) toolResults(t *testing.T, c caller, id int64) map[string]message {
	t.Helper()
	out := map[string]message{}
	for _, m := range a.messages(t, c, id, "").Messages {
		if m.ToolCallID != nil && *m.ToolCallID != "" {
			out[*m.ToolCallID] = m
		}
	}
	return out
}

func TestAPIDecidesCallByCall(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "percall")
	lookup, refund := twoCalls(t, paused)
	api := a.bearer(t, "approver", runtime.ScopeRunDecide)
	out := api.call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"), jsonBody(t, map[string]any{
		"turn_digest": paused.Digest,
		"calls": map[string]any{
			lookup: map[string]any{"decision": "approve"},
			refund: map[string]any{"decision": "deny", "reason": "MARKER-REASON not eligible"},
		},
	}), nil)
	if m := out.wantKeys(t, http.StatusOK, "outcome"); m["outcome"].(map[string]any)["type"] != "done" {
		t.Fatalf("outcome = %v, want done", m["outcome"])
	}
	a.wantLookupRanRefundDenied(t, paused, order, "denied by approver: MARKER-REASON not eligible")
	// The decision reads as mixed, with each call's choice beside it.
	var kind string
	var calls []byte
	if err := a.DB.QueryRow(`SELECT kind, calls FROM decisions WHERE run_id = ?`, paused.RunID).Scan(&kind, &calls); err != nil {
		t.Fatal(err)
	}
	if kind != runtime.DecisionMixed || !strings.Contains(string(calls), `"decision":"deny"`) {
		t.Errorf("decision kind %q calls %s, want mixed with the choices", kind, calls)
	}
	ev := a.approvalEvent(t, paused.RunID)
	if !strings.Contains(ev, `"per_call":[{"call_id":"`+lookup+`","decision":"approve","tool":"lookup_order"}`) ||
		!strings.Contains(ev, `"decision":"deny","reason":"MARKER-REASON not eligible","tool":"refund_order"`) {
		t.Errorf("the approval event does not say per call what was decided: %s", ev)
	}
	// The run page says it per call too, and the history reads the kind.
	owner := a.signIn(t, "owner")
	_, page := owner.get(fmt.Sprintf("/runs/%d", paused.RunID))
	for _, want := range []string{
		`data-testid="step-call-verdict" data-call-id="` + refund + `" data-decision="deny"`,
		`data-testid="step-call-verdict" data-call-id="` + lookup + `" data-decision="approve"`,
		`MARKER-REASON not eligible`,
		`approved 1, denied 1 of 2 calls`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page has no %s", want)
		}
	}
	_, history := a.signIn(t, "approver").get("/runs")
	if !strings.Contains(history, "decided call by call") {
		t.Errorf("the approver's history does not say the run was decided call by call")
	}
}

// approvalEvent is the payload of a run's approval event as stored.
func (a *testApp) approvalEvent(t *testing.T, id int64) string {
	t.Helper()
	var p []byte
	if err := a.DB.QueryRow(`SELECT payload FROM run_events WHERE run_id = ? AND kind = 'approval'`, id).Scan(&p); err != nil {
		t.Fatal(err)
	}
	return string(p)
}

// TestAPICallByCallRefusals: every malformed or incomplete set of choices
// is refused with nothing written, each bad call named by its field.
func TestAPICallByCallRefusals(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "percall")
	lookup, refund := twoCalls(t, paused)
	path := runPathAPI(paused.RunID, "/decisions")
	body := func(decision string, calls map[string]any) string {
		b := map[string]any{"turn_digest": paused.Digest, "calls": calls}
		if decision != "" {
			b["decision"] = decision
		}
		return jsonBody(t, b)
	}
	approve, deny := map[string]any{"decision": "approve"}, map[string]any{"decision": "deny"}
	for _, tc := range []struct {
		name   string
		user   string
		body   string
		status int
		code   string
		fields []string
	}{
		{"a call left out", "approver", body("", map[string]any{lookup: approve}), 422, "invalid_input", []string{"calls." + refund}},
		{"no call named", "approver", body("", map[string]any{}), 422, "invalid_input", []string{"calls." + lookup, "calls." + refund}},
		{"an unknown call", "approver", body("", map[string]any{lookup: approve, refund: deny, "call-nope": deny}), 422, "invalid_input",
			[]string{"calls.call-nope"}},
		{"a decision the calls do not make", "approver", body("approve", map[string]any{lookup: approve, refund: deny}), 422, "invalid_input",
			[]string{"calls." + refund + ".decision"}},
		{"a call neither approved nor denied", "approver", body("", map[string]any{lookup: approve, refund: map[string]any{"decision": "maybe"}}),
			400, "invalid_request", nil},
		{"arguments on a denied call", "approver", body("", map[string]any{lookup: approve,
			refund: map[string]any{"decision": "deny", "arguments": map[string]any{"order_id": order}}}), 400, "invalid_request", nil},
		{"a bad edit of an approved call", "approver", body("", map[string]any{refund: deny,
			lookup: map[string]any{"decision": "approve", "arguments": map[string]any{"order_id": 7}}}), 422, "invalid_input",
			[]string{"calls." + lookup + ".arguments.order_id"}},
		{"an unknown key in a call", "approver", body("", map[string]any{lookup: approve, refund: map[string]any{"decision": "deny", "why": "x"}}),
			400, "invalid_request", nil},
		// The grant is asked of the approved calls only: approving the
		// refund takes refunds, which the approver lacks.
		{"approving a call without its grant", "approver", body("", map[string]any{lookup: deny, refund: approve}), 403, "approver_not_permitted", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := a.State(t, paused.RunID)
			e := a.bearer(t, tc.user, runtime.ScopeRunDecide).call(t, a, http.MethodPost, path, tc.body, nil).wantError(t, tc.status, tc.code)
			fields, _ := e["fields"].(map[string]any)
			for _, f := range tc.fields {
				if _, ok := fields[f]; !ok {
					t.Errorf("fields = %v, want one for %s", e["fields"], f)
				}
			}
			if len(tc.fields) > 0 && len(fields) != len(tc.fields) {
				t.Errorf("fields = %v, want only %v", e["fields"], tc.fields)
			}
			a.Unchanged(t, paused.RunID, before)
		})
	}
}

// TestAPICallByCallEditsTheApprovedCall: an approved call runs with its
// edit, the denied one does not run.
func TestAPICallByCallEditsTheApprovedCall(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "percall")
	lookup, refund := twoCalls(t, paused)
	out := a.bearer(t, "admin", runtime.ScopeRunDecide).call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"), jsonBody(t, map[string]any{
		"turn_digest": paused.Digest, "decision": "mixed",
		"calls": map[string]any{
			lookup: map[string]any{"decision": "deny", "reason": "no need"},
			refund: map[string]any{"decision": "approve", "arguments": map[string]any{"order_id": order, "amount_cents": 321}},
		},
	}), nil)
	out.wantKeys(t, http.StatusOK, "outcome")
	if got, all := a.refundsOf(t, order, 321), a.Refunds(t, order); got != 1 || all != 1 {
		t.Errorf("refunds of 321 cents = %d of %d, want the one refund with the edited amount", got, all)
	}
	results := a.toolResults(t, a.bearer(t, "owner", runtime.ScopeRunRead), paused.RunID)
	if m := results[lookup]; m.Content == nil || *m.Content != "denied by admin: no need" {
		t.Errorf("the lookup's result = %+v, want its denial", m)
	}
}

// TestAPICallByCallUnderFourEyes: the owner may deny every call, and
// approve none; someone else may approve one and deny the other.
func TestAPICallByCallUnderFourEyes(t *testing.T) {
	a := newApp(t, 0)
	paused := a.start(t, "percall-four-eyes", "owner", "")
	lookup, refund := twoCalls(t, paused)
	owner := a.bearer(t, "owner", runtime.ScopeRunDecide)
	path := runPathAPI(paused.RunID, "/decisions")
	mixed := jsonBody(t, map[string]any{"turn_digest": paused.Digest,
		"calls": map[string]any{lookup: map[string]any{"decision": "approve"}, refund: map[string]any{"decision": "deny"}}})
	before := a.State(t, paused.RunID)
	owner.call(t, a, http.MethodPost, path, mixed, nil).wantError(t, http.StatusForbidden, "four_eyes")
	a.Unchanged(t, paused.RunID, before)
	out := owner.call(t, a, http.MethodPost, path, jsonBody(t, map[string]any{"turn_digest": paused.Digest,
		"calls": map[string]any{lookup: map[string]any{"decision": "deny"}, refund: map[string]any{"decision": "deny", "reason": "mine"}}}), nil)
	out.wantKeys(t, http.StatusOK, "outcome")
	var kind string
	if err := a.DB.QueryRow(`SELECT kind FROM decisions WHERE run_id = ?`, paused.RunID).Scan(&kind); err != nil {
		t.Fatal(err)
	}
	if kind != runtime.DecisionDeny {
		t.Errorf("kind of a decision denying every call = %q, want deny", kind)
	}

	other := a.start(t, "percall-four-eyes", "owner", "")
	lookup, refund = twoCalls(t, other)
	a.bearer(t, "approver", runtime.ScopeRunDecide).call(t, a, http.MethodPost, runPathAPI(other.RunID, "/decisions"),
		jsonBody(t, map[string]any{"turn_digest": other.Digest, "calls": map[string]any{
			lookup: map[string]any{"decision": "approve"}, refund: map[string]any{"decision": "deny"}}}), nil).
		wantKeys(t, http.StatusOK, "outcome")
	if st := a.Run(t, other.RunID).Status; st != runtime.StatusCompleted {
		t.Errorf("run is %s, want completed", st)
	}
}

// TestAPICallByCallStandsForTheApprovedCallsOnly: scope=session records a
// standing approval of the approved call's tool, never the denied one's.
func TestAPICallByCallStandsForTheApprovedCallsOnly(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "percall")
	lookup, refund := twoCalls(t, paused)
	a.bearer(t, "approver", runtime.ScopeRunDecide).call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"),
		jsonBody(t, map[string]any{"turn_digest": paused.Digest, "scope": "session", "calls": map[string]any{
			lookup: map[string]any{"decision": "approve"}, refund: map[string]any{"decision": "deny"}}}), nil).
		wantKeys(t, http.StatusOK, "outcome")
	var tools []string
	rows, err := a.DB.Query(`SELECT tool_name FROM standing_approvals WHERE run_id = ?`, paused.RunID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tools = append(tools, n)
	}
	if len(tools) != 1 || tools[0] != "lookup_order" {
		t.Errorf("standing approvals = %v, want lookup_order alone", tools)
	}
}

// TestInboxCardOffersAChoicePerCall: a card of two calls has a fieldset
// per call, with its radios and its reason; a card of one has none.
func TestInboxCardOffersAChoicePerCall(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "percall")
	lookup, refund := twoCalls(t, paused)
	one, _ := a.Waiting(t, "refund")
	_, body := a.signIn(t, "approver").get("/inbox")
	card := inboxCard(t, body, paused.RunID)
	for _, want := range []string{
		`data-testid="call-choices"`,
		`name="calls.` + lookup + `.decision" value="approve"`,
		`name="calls.` + refund + `.decision" value="deny"`,
		`name="calls.` + refund + `.reason"`,
		`<legend>Call 2: refund_order</legend>`,
		`name="decision" value="calls"`,
	} {
		if !strings.Contains(card, want) {
			t.Errorf("the card has no %s:\n%s", want, card)
		}
	}
	if card := inboxCard(t, body, one.RunID); strings.Contains(card, `data-testid="call-choices"`) {
		t.Errorf("a card of one call offers a choice per call:\n%s", card)
	}
}

// TestNativeInboxDecidesCallByCall: without JavaScript, the card's form
// approves the lookup and denies the refund with its own reason, both
// through "Decide each call" and through "Approve the rest".
func TestNativeInboxDecidesCallByCall(t *testing.T) {
	for _, button := range []string{"calls", "approve"} {
		t.Run(button, func(t *testing.T) {
			a := newApp(t, 0)
			paused, order := a.Waiting(t, "percall")
			lookup, refund := twoCalls(t, paused)
			f := url.Values{"turn_digest": {paused.Digest}, "decision": {button}, "scope": {"once"},
				"calls." + refund + ".decision": {"deny"}, "calls." + refund + ".reason": {"not eligible"}}
			if button == "calls" {
				f.Set("calls."+lookup+".decision", "approve")
			}
			res, body := a.signIn(t, "approver").post(inboxPath(paused.RunID, "decision"), f)
			if res.StatusCode != http.StatusSeeOther {
				t.Fatalf("status %d, want 303:\n%s", res.StatusCode, body)
			}
			a.wantLookupRanRefundDenied(t, paused, order, "denied by approver: not eligible")
		})
	}
}

// TestNativeInboxCallLeftOpenIsShownAgain: "Decide each call" with a call
// left open is a 422 card with what was chosen kept and the open call
// named; nothing is written.
func TestNativeInboxCallLeftOpenIsShownAgain(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "percall")
	lookup, refund := twoCalls(t, paused)
	before := a.State(t, paused.RunID)
	res, body := a.signIn(t, "approver").post(inboxPath(paused.RunID, "decision"), url.Values{
		"turn_digest": {paused.Digest}, "decision": {"calls"}, "scope": {"once"},
		"calls." + lookup + ".decision": {"approve"}, "calls." + lookup + ".reason": {"MARKER-TYPED"}})
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422:\n%s", res.StatusCode, body)
	}
	for _, want := range []string{
		`data-field="calls.` + refund + `"`,
		`name="calls.` + lookup + `.decision" value="approve" checked`,
		`MARKER-TYPED`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page has no %s:\n%s", want, body)
		}
	}
	a.Unchanged(t, paused.RunID, before)
}

// wantLookupRanRefundDenied checks a percall run decided with its lookup
// approved and its refund denied: it completed, no refund was made, the
// model read the refund's denial (want) and the lookup's result.
func (a *testApp) wantLookupRanRefundDenied(t *testing.T, paused runtime.Outcome, order, want string) {
	t.Helper()
	lookup, refund := twoCalls(t, paused)
	if st := a.Run(t, paused.RunID).Status; st != runtime.StatusCompleted {
		t.Fatalf("run is %s, want completed", st)
	}
	if n := a.Refunds(t, order); n != 0 {
		t.Errorf("refunds = %d after the refund was denied, want 0", n)
	}
	results := a.toolResults(t, a.bearer(t, "owner", runtime.ScopeRunRead), paused.RunID)
	if m := results[refund]; m.Content == nil || *m.Content != want || !m.IsError {
		t.Errorf("the refund's result for the model = %+v, want %q", m, want)
	}
	if m := results[lookup]; m.Content == nil || !strings.Contains(*m.Content, order) || m.IsError {
		t.Errorf("the lookup's result = %+v, want the order it ran on", m)
	}
}
