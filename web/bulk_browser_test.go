package web_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
	"github.com/turnstile-dev/turnstile/web"
)

// bulkBox is a card's checkbox of the bulk form.
func bulkBox(id int64) string {
	return runSelector(id) + ` input[data-testid="bulk-select"]`
}

// Without JavaScript: tick two cards, press "Approve selected": a plain
// POST, a 303 to the inbox whose flash counts them, and a worker carries
// both out; the third card, unticked, still waits.
func TestBrowserBulkWithoutJavaScript(t *testing.T) {
	a := newApp(t, 0, func(d *web.Deps) { d.Workers = aliveWorkers{} })
	x, _ := a.Waiting(t, "refund")
	y, _ := a.Waiting(t, "refund")
	z, _ := a.Waiting(t, "refund")
	testrig.Work(t, a.Engine, 1, 10*time.Millisecond)

	b := openTab(t, a, false)
	b.signIn("approver")
	b.do("tick two cards", stepTimeout,
		chromedp.Click(chromedp.CSS(bulkBox(x.RunID))),
		chromedp.Click(chromedp.CSS(bulkBox(y.RunID))),
		chromedp.Click(chromedp.CSS(`[data-testid="bulk-approve"]`)))
	got := b.landOnInbox(runSelector(x.RunID), stepTimeout)
	if want := "Approved 2 runs; they continue in the background."; got != want {
		t.Errorf("flash %q, want %q", got, want)
	}
	posts := b.posts("/inbox/decisions")
	if len(posts) != 1 || posts[0].status != 303 {
		t.Errorf("posts to /inbox/decisions: %+v, want one answered 303", posts)
	}
	for _, out := range []runtime.Outcome{x, y} {
		a.WaitStatus(t, out.RunID, runtime.StatusCompleted, 20*time.Second)
	}
	if r := a.Run(t, z.RunID); r.Status != runtime.StatusWaitingForApproval {
		t.Errorf("the unticked run is %s", r.Status)
	}
	if n := a.Count(t, `SELECT COUNT(*) FROM demo_refunds`); n != 2 {
		t.Errorf("%d refunds, want 2", n)
	}
}

// With JavaScript: "select all on this page" ticks every card, "Deny
// selected" streams, and the inbox comes back empty with the flash.
func TestBrowserBulkWithJavaScript(t *testing.T) {
	a := newApp(t, 0)
	x, _ := a.Waiting(t, "refund")
	y, _ := a.Waiting(t, "refund")

	b := openTab(t, a, true)
	b.signIn("approver")
	b.do("select all and deny", stepTimeout,
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="select-all"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="select-all"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="bulk-deny"]`)))
	got := b.landOnInbox(runSelector(y.RunID), stepTimeout)
	if want := "Denied 2 runs: 2 completed."; got != want {
		t.Errorf("flash %q, want %q", got, want)
	}
	posts := b.posts("/inbox/decisions")
	if len(posts) != 1 || posts[0].status != 200 {
		t.Errorf("posts to /inbox/decisions: %+v, want one streamed (200)", posts)
	}
	for _, out := range []runtime.Outcome{x, y} {
		if r := a.Run(t, out.RunID); r.Status != runtime.StatusCompleted {
			t.Errorf("run %d is %s", out.RunID, r.Status)
		}
	}
	if n := a.Count(t, `SELECT COUNT(*) FROM demo_refunds`); n != 0 {
		t.Errorf("%d refunds after a denial", n)
	}
}
