package templates

import (
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/templates/htmltest"
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
	_, doc := htmltest.Render(t, Inbox(p))
	card := htmltest.One(t, doc, "card", htmltest.Is("article", "data-testid", "inbox-run"))
	var forms []string
	for _, f := range htmltest.FindAll(card, htmltest.Is("form")) {
		v, _ := htmltest.Attr(f, "data-testid")
		forms = append(forms, v)
	}
	if got := strings.Join(forms, ","); got != ",edit-form,edit-form" {
		t.Errorf("the card's forms are %q, want the decision form first, then one edit form per call", got)
	}
	edits := htmltest.FindAll(card, htmltest.Is("details", "data-testid", "edit"))
	if len(edits) != 2 {
		t.Fatalf("%d edit forms, want 2", len(edits))
	}
	first, second := edits[0], edits[1]
	htmltest.WantAttr(t, first, "data-call-id", "call_1")
	if _, open := htmltest.Attr(first, "open"); !open {
		t.Error("the refused edit is folded, want it open")
	}
	if _, open := htmltest.Attr(second, "open"); open {
		t.Error("an edit nobody refused is open, want it folded")
	}
	htmltest.One(t, first, "the edited call", htmltest.Is("input", "name", "edit", "value", "call_1"))
	htmltest.One(t, first, "the decision", htmltest.Is("input", "type", "hidden", "name", "decision", "value", "approve"))
	htmltest.None(t, first, "a button named decision", htmltest.Is("button", "name", "decision"))
	htmltest.WantAttr(t, htmltest.One(t, first, "the amount", htmltest.Is("input", "name", "arguments.call_1.amount_cents")), "value", "0")
	wantText(t, first, "the amount's error", htmltest.Is("p", "data-field", "arguments.call_1.amount_cents"), "must be at least 1")
	if got := htmltest.Text(first); !strings.Contains(got, "also approves the turn's 1 other call") {
		t.Errorf("the edit form of a turn of two calls does not say it approves the other: %q", got)
	}
	area := htmltest.One(t, second, "the JSON field", htmltest.Is("textarea", "name", "arguments.call_2"))
	if got := htmltest.Text(area); got != `{"to": ["a@example.com"]}` {
		t.Errorf("the JSON field holds %q", got)
	}
}
