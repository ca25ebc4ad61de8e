package web_test

// Browser tests of edit, then approve: an operator unfolds a call's "Edit
// and approve" form, changes the refund's amount and approves; with
// JavaScript the continuation streams and the inbox comes back with the
// outcome, and without it a refused edit comes back as a 422 page that
// keeps what was typed. Every wait is on a condition with a deadline.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// editSelectors are a run's edit form and its amount field.
func editSelectors(runID int64, callID string) (form, amount string) {
	form = runSelector(runID) + fmt.Sprintf(` details[data-testid="edit"][data-call-id="%s"]`, callID)
	return form, form + fmt.Sprintf(` input[name="arguments.%s.amount_cents"]`, callID)
}

// typeAmount unfolds the edit form, types an amount and approves as
// edited. novalidate lets an amount the browser would refuse (below
// min="1") reach the server, as an old browser's or a hand-made request
// would.
func typeAmount(b *tab, form, amount, cents string) {
	b.t.Helper()
	b.do("edit the amount to "+cents, stepTimeout,
		chromedp.Click(chromedp.CSS(form+` summary`)),
		chromedp.WaitVisible(chromedp.CSS(amount)),
		chromedp.Clear(chromedp.CSS(amount)),
		chromedp.SendKeys(chromedp.CSS(amount), cents),
		chromedp.SetAttributeValue(chromedp.CSS(form+` form`), "novalidate", ""),
		chromedp.Click(chromedp.CSS(form+` button[data-testid="edit-approve"]`)),
	)
}

// TestBrowserEditThenApproveStreams: with JavaScript, the edited approval
// streams, the inbox comes back with the outcome, and the one refund has
// the edited amount.
func TestBrowserEditThenApproveStreams(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "refund")
	callID := paused.Pending.Calls[0].ID
	b := openTab(t, a, true)
	b.signIn("approver")
	form, amount := editSelectors(paused.RunID, callID)
	if got := shown(b, amount); got != "hidden" {
		t.Errorf("before it is unfolded the edit form's amount is %s, want hidden", got)
	}
	if got := get(b, "read the prefilled order", chromedp.Value(chromedp.CSS(form+fmt.Sprintf(` input[name="arguments.%s.order_id"]`, callID)))); got != order {
		t.Errorf("the edit form's order_id is %q, want %q prefilled", got, order)
	}

	typeAmount(b, form, amount, "1700")
	flash := b.landOnInbox(runSelector(paused.RunID), settleTimeout)
	if want := fmt.Sprintf("You approved refund_order; run %d completed: the agent finished.", paused.RunID); flash != want {
		t.Errorf("flash = %q, want %q", flash, want)
	}
	posts := b.posts(fmt.Sprintf("/inbox/runs/%d/decision", paused.RunID))
	if len(posts) != 1 || posts[0].kind != network.ResourceTypeFetch || !strings.Contains(posts[0].accept, "application/x-ndjson") || posts[0].status != 200 {
		t.Errorf("decision requests = %+v, want one streamed fetch answered 200", posts)
	}
	wantSettled(t, a, paused.RunID, order)
	if n := a.refundsOf(t, order, 1700); n != 1 {
		t.Errorf("refunds of 1700 cents = %d, want the one refund with the edited amount", n)
	}
}

// TestBrowserRefusedEditKeepsWhatWasTyped: an amount the schema refuses
// comes back as the server's 422 page (natively, or through the script's
// fallback) with the form unfolded, the amount as typed and the message
// beside it; nothing is decided. The corrected edit then refunds it.
func TestBrowserRefusedEditKeepsWhatWasTyped(t *testing.T) {
	a := newApp(t, 0)
	eachJS(t, func(t *testing.T, js bool) {
		paused, order := a.Waiting(t, "refund")
		callID := paused.Pending.Calls[0].ID
		b := openTab(t, a, js)
		b.signIn("approver")
		form, amount := editSelectors(paused.RunID, callID)

		typeAmount(b, form, amount, "0")
		b.do("see the field error", stepTimeout, chromedp.WaitVisible(chromedp.CSS(form+` [data-testid="field-error"]`)), loaded())
		b.wantAt(fmt.Sprintf("/inbox/runs/%d/decision", paused.RunID))
		if got := get(b, "read the field error's field", chromedp.AttributeValue(chromedp.CSS(form+` [data-testid="field-error"]`), "data-field")); got.Value != "arguments."+callID+".amount_cents" {
			t.Errorf("the field error is on %q, want the amount", got.Value)
		}
		if got := text(b, form+` [data-testid="field-error"]`); got != "must be at least 1" {
			t.Errorf("the field error says %q", got)
		}
		if got := get(b, "read the amount", chromedp.Value(chromedp.CSS(amount))); got != "0" {
			t.Errorf("the amount reads %q, want the 0 typed", got)
		}
		posts := b.posts(fmt.Sprintf("/inbox/runs/%d/decision", paused.RunID))
		if last := posts[len(posts)-1]; last.kind != network.ResourceTypeDocument || last.status != 422 {
			t.Errorf("decision requests = %+v, want the last a native form POST answered 422", posts)
		}
		if js && (len(posts) != 2 || posts[0].kind != network.ResourceTypeFetch || posts[0].status != 422) {
			t.Errorf("decision requests = %+v, want the script's fetch answered 422 first", posts)
		}
		if n := len(a.Decisions(t, paused.RunID)); n != 0 {
			t.Errorf("after the 422 decisions = %d, want 0", n)
		}

		b.do("correct the amount", stepTimeout,
			chromedp.Clear(chromedp.CSS(amount)),
			chromedp.SendKeys(chromedp.CSS(amount), "900"),
			chromedp.Click(chromedp.CSS(form+` button[data-testid="edit-approve"]`)))
		if got, want := b.landOnInbox(runSelector(paused.RunID), settleTimeout), fmt.Sprintf("You approved refund_order; run %d completed: the agent finished.", paused.RunID); got != want {
			t.Errorf("flash = %q, want %q", got, want)
		}
		wantSettled(t, a, paused.RunID, order)
		if n := a.refundsOf(t, order, 900); n != 1 {
			t.Errorf("refunds of 900 cents = %d, want the one refund with the corrected amount", n)
		}
	})
}
