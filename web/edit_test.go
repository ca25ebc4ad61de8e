package web_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// refundsOf counts an order's refunds of exactly this amount.
func (a *testApp) refundsOf(t testing.TB, order string, cents int) int {
	t.Helper()
	return a.Count(t, `SELECT COUNT(*) FROM demo_refunds WHERE order_id = ? AND amount_cents = ?`, order, cents)
}

// editForm is an "Edit and approve" form of refund_order's fields as the
// inbox renders it, with the amount typed in.
func editForm(paused runtime.Outcome, order, amount string) url.Values {
	id := paused.Pending.Calls[0].ID
	return url.Values{"turn_digest": {paused.Digest}, "decision": {"approve"}, "scope": {"once"}, "edit": {id},
		"arguments." + id + ".order_id": {order}, "arguments." + id + ".amount_cents": {amount},
		"arguments." + id + ".reason": {"MARKER-ARG"}, "arguments." + id + ".processing_seconds": {""}}
}

func TestInboxCardOffersAnEditFormPerCall(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "refund")
	id := paused.Pending.Calls[0].ID
	_, body := a.signIn(t, "approver").get("/inbox")
	card := inboxCard(t, body, paused.RunID)
	for _, want := range []string{
		`data-testid="edit-form"`,
		`name="edit" value="` + id + `"`,
		`name="arguments.` + id + `.order_id" value="` + order + `"`,
		`name="arguments.` + id + `.amount_cents"`,
		`data-testid="edit-approve"`,
		`<input type="hidden" name="decision" value="approve">`,
	} {
		if !strings.Contains(card, want) {
			t.Errorf("the card has no %s:\n%s", want, card)
		}
	}
	// Under four-eyes the owner may only deny: no edit either.
	mine := a.start(t, "four-eyes", "owner", "")
	_, body = a.signIn(t, "owner").get("/inbox")
	if card := inboxCard(t, body, mine.RunID); strings.Contains(card, `data-testid="edit-form"`) {
		t.Errorf("the owner of a four-eyes run is offered an edit:\n%s", card)
	}
}

func TestNativeEditApproveRefundsTheEditedAmount(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "refund")
	c := a.signIn(t, "approver")
	res, _ := c.post(inboxPath(paused.RunID, "decision"), editForm(paused, order, "1500"))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d, want 303", res.StatusCode)
	}
	// Without a worker the native post ran the continuation to its end.
	if st := a.Run(t, paused.RunID).Status; st != runtime.StatusCompleted {
		t.Fatalf("run is %s, want completed", st)
	}
	if got, all := a.refundsOf(t, order, 1500), a.Refunds(t, order); got != 1 || all != 1 {
		t.Errorf("refunds of 1500 cents = %d of %d, want the one refund with the edited amount", got, all)
	}
}

// TestNativeBadEditIsShownAgain: each refused edit is a 422 page with the
// edit form unfolded, what was typed kept and the message beside the
// field; nothing is written.
func TestNativeBadEditIsShownAgain(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "refund")
	id := paused.Pending.Calls[0].ID
	c := a.signIn(t, "approver")
	asJSON := func(text string) url.Values {
		return url.Values{"turn_digest": {paused.Digest}, "decision": {"approve"}, "edit": {id}, "arguments." + id: {text}}
	}
	for _, tc := range []struct {
		name  string
		form  url.Values
		field string // the field-error's data-field
		kept  string // what the page must show again
		says  string
	}{
		{"text in a number field", editForm(paused, order, "twelve"), "arguments." + id + ".amount_cents",
			`value="twelve"`, "must be a whole number"},
		{"below the schema's minimum", editForm(paused, order, "0"), "arguments." + id + ".amount_cents",
			`value="0"`, "must be at least 1"},
		{"required field emptied", editForm(paused, "", "5"), "arguments." + id + ".order_id",
			`min="1" value="5"`, "is required"},
		{"invalid JSON text", asJSON(`{"order_id": "` + order + `", `), "arguments." + id,
			`{&#34;order_id&#34;: &#34;` + order + `&#34;, </textarea>`, "not valid JSON"},
		{"JSON that is not an object", asJSON(`[1]`), "arguments." + id, `[1]</textarea>`, "must be a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := a.State(t, paused.RunID)
			res, body := c.post(inboxPath(paused.RunID, "decision"), tc.form)
			if res.StatusCode != http.StatusUnprocessableEntity {
				t.Fatalf("status %d, want 422", res.StatusCode)
			}
			card := inboxCard(t, body, paused.RunID)
			if !strings.Contains(card, `data-field="`+tc.field+`"`) {
				t.Errorf("no field error for %s:\n%s", tc.field, card)
			}
			if !strings.Contains(card, tc.kept) {
				t.Errorf("the page does not keep %s:\n%s", tc.kept, card)
			}
			if !strings.Contains(html.UnescapeString(card), tc.says) {
				t.Errorf("the page does not say %q:\n%s", tc.says, card)
			}
			if !strings.Contains(card, `data-testid="edit" data-call-id="`+id+`" open`) {
				t.Errorf("the refused edit form is folded:\n%s", card)
			}
			a.Unchanged(t, paused.RunID, before)
		})
	}
	t.Run("unknown call id", func(t *testing.T) {
		before := a.State(t, paused.RunID)
		res, body := c.post(inboxPath(paused.RunID, "decision"), url.Values{"turn_digest": {paused.Digest},
			"decision": {"approve"}, "arguments.call-nope": {`{}`}})
		if res.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "arguments.call-nope is not a call of the pending turn") {
			t.Errorf("status %d, want 422 naming the unknown call:\n%s", res.StatusCode, body)
		}
		a.Unchanged(t, paused.RunID, before)
	})
	t.Run("edit with a denial", func(t *testing.T) {
		before := a.State(t, paused.RunID)
		form := editForm(paused, order, "5")
		form.Set("decision", "deny")
		res, _ := c.post(inboxPath(paused.RunID, "decision"), form)
		wantRedirect(t, res, "/inbox")
		if got := c.flashText(); !strings.Contains(got, "only with an approval") {
			t.Errorf("flash = %q, want it to say edits come only with an approval", got)
		}
		a.Unchanged(t, paused.RunID, before)
	})
}

func TestAPIEditThenApprove(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "refund")
	id := paused.Pending.Calls[0].ID
	api := a.bearer(t, "approver", runtime.ScopeRunDecide)
	path := runPathAPI(paused.RunID, "/decisions")
	body := func(decision string, args any) string {
		return jsonBody(t, map[string]any{"turn_digest": paused.Digest, "decision": decision, "arguments": args})
	}
	for _, tc := range []struct {
		name   string
		body   string
		status int
		code   string
		field  string
	}{
		{"not an object", body("approve", map[string]any{id: []int{1}}), 422, "invalid_input", "arguments." + id},
		{"null", body("approve", map[string]any{id: nil}), 422, "invalid_input", "arguments." + id},
		{"unknown call id", body("approve", map[string]any{"call-nope": map[string]any{}}), 422, "invalid_input", "arguments.call-nope"},
		{"schema violation", body("approve", map[string]any{id: map[string]any{"order_id": order, "amount_cents": "ten"}}),
			422, "invalid_input", "arguments." + id + ".amount_cents"},
		{"with a denial", body("deny", map[string]any{id: map[string]any{"order_id": order}}), 400, "invalid_request", ""},
		{"arguments not an object of calls", body("approve", []any{1}), 400, "invalid_request", ""},
		{"a key given twice", fmt.Sprintf(`{"turn_digest":%q,"decision":"approve","arguments":{%q:{"order_id":%q,"amount_cents":1,"amount_cents":2}}}`,
			paused.Digest, id, order), 400, "invalid_request", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := a.State(t, paused.RunID)
			e := api.call(t, a, http.MethodPost, path, tc.body, nil).wantError(t, tc.status, tc.code)
			if tc.field != "" {
				fields, _ := e["fields"].(map[string]any)
				if _, ok := fields[tc.field]; !ok {
					t.Errorf("fields = %v, want one for %s", e["fields"], tc.field)
				}
			}
			a.Unchanged(t, paused.RunID, before)
		})
	}
	out := api.call(t, a, http.MethodPost, path, body("approve", map[string]any{id: map[string]any{"order_id": order, "amount_cents": 321}}), nil)
	if m := out.wantKeys(t, http.StatusOK, "outcome"); m["outcome"].(map[string]any)["type"] != "done" {
		t.Errorf("outcome = %v, want done", m["outcome"])
	}
	if st := a.Run(t, paused.RunID).Status; st != runtime.StatusCompleted {
		t.Errorf("run is %s, want completed", st)
	}
	if got, all := a.refundsOf(t, order, 321), a.Refunds(t, order); got != 1 || all != 1 {
		t.Errorf("refunds of 321 cents = %d of %d, want the one refund with the edited amount", got, all)
	}
}
