package templates

import (
	"strings"
	"testing"
)

// TestEditFormsFollowTheDecisionForm: an approval card has one "Edit and
// approve" form per call that offers one, after the form that decides the
// turn as offered: fields for a flat object, a JSON field otherwise, each
// posting decision=approve with the call's id; a refused edit is unfolded
// with its message beside the field.
func TestEditFormsFollowTheDecisionForm(t *testing.T) {
	amount := Field{Name: "arguments.call_1.amount_cents", Label: "amount_cents", Type: "integer", Value: "0",
		Error: "must be at least 1"}
	p := InboxPage{Page: samplePage(), Now: now, Total: 1, Runs: []InboxRun{{
		ID: 7, Configuration: "Refunds", Kind: "approval", Digest: "d1g",
		Calls: []Call{
			{ID: "call_1", Name: "refund_order", Edit: &EditForm{Fields: []Field{amount}, Open: true, Others: 1}},
			{ID: "call_2", Name: "send_mail", Edit: &EditForm{JSON: `{"to": ["a@example.com"]}`}},
		},
	}}}
	_, doc := render(t, Inbox(p))
	card := one(t, doc, "card", is("article", "data-testid", "inbox-run"))
	var forms []string
	for _, f := range findAll(card, is("form")) {
		v, _ := attr(f, "data-testid")
		forms = append(forms, v)
	}
	if got := strings.Join(forms, ","); got != ",edit-form,edit-form" {
		t.Errorf("the card's forms are %q, want the decision form first, then one edit form per call", got)
	}
	edits := findAll(card, is("details", "data-testid", "edit"))
	if len(edits) != 2 {
		t.Fatalf("%d edit forms, want 2", len(edits))
	}
	first, second := edits[0], edits[1]
	wantAttr(t, first, "data-call-id", "call_1")
	if _, open := attr(first, "open"); !open {
		t.Error("the refused edit is folded, want it open")
	}
	if _, open := attr(second, "open"); open {
		t.Error("an edit nobody refused is open, want it folded")
	}
	one(t, first, "the edited call", is("input", "name", "edit", "value", "call_1"))
	one(t, first, "the decision", is("input", "type", "hidden", "name", "decision", "value", "approve"))
	none(t, first, "a button named decision", is("button", "name", "decision"))
	wantAttr(t, one(t, first, "the amount", is("input", "name", "arguments.call_1.amount_cents")), "value", "0")
	wantText(t, first, "the amount's error", is("p", "data-field", "arguments.call_1.amount_cents"), "must be at least 1")
	if got := text(first); !strings.Contains(got, "also approves the turn's 1 other call") {
		t.Errorf("the edit form of a turn of two calls does not say it approves the other: %q", got)
	}
	area := one(t, second, "the JSON field", is("textarea", "name", "arguments.call_2"))
	if got := text(area); got != `{"to": ["a@example.com"]}` {
		t.Errorf("the JSON field holds %q", got)
	}
}
