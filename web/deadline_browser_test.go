package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// TestBrowserEscalatedTurn, in Chromium with JavaScript: the card says
// when the turn expires; once a worker escalated it, the approver's form
// (of the old turn) is refused with why they may not decide it any more
// (checked before the digest: reviewing it again would not help them), and
// the inbox they land on shows the card with the escalation's note and no
// form; an admin (who holds every grant)
// approves the new turn and the run completes.
func TestBrowserEscalatedTurn(t *testing.T) {
	a := newApp(t, 0)
	a.Configure(t, escalateYAML)
	paused, order := a.Waiting(t, "escalate")
	sel := runSelector(paused.RunID)

	b := openTab(t, a, true)
	b.signIn("approver")
	if got := get(b, "read the deadline", chromedp.Text(chromedp.CSS(sel+` [data-testid="expires"]`))); !strings.HasPrefix(got, "expires in") && !strings.HasPrefix(got, "expired") {
		t.Errorf("the card says %q about its deadline", got)
	}

	stop := testrig.Work(t, a.Engine, 1, 20*time.Millisecond)
	a.WaitRun(t, paused.RunID, 10*time.Second, "escalated", func(r *runtime.Run) bool {
		return r.Status == runtime.StatusWaitingForApproval && r.TurnDigest != paused.Digest
	})
	stop() // the escalated turn waits while the test decides it

	b.do("approve on the stale form", stepTimeout,
		chromedp.Click(chromedp.CSS(sel+` button[name="decision"][value="approve"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
		chromedp.WaitVisible(chromedp.CSS(sel+` [data-testid="escalated"]`)),
		loaded(),
	)
	b.wantAt("/inbox")
	if got, want := strings.TrimSpace(get(b, "read the flash", chromedp.Text(chromedp.CSS(`[data-testid="flash"]`)))),
		fmt.Sprintf(`You may not decide run %d: nobody decided it in time, and it was escalated: only holders of the "refunds" grant may decide it now.`, paused.RunID); got != want {
		t.Errorf("flash = %q, want %q", got, want)
	}
	if n := get(b, "count the card's forms", chromedp.Evaluate[int](`document.querySelectorAll('`+sel+` form').length`)); n != 0 {
		t.Errorf("the approver's escalated card has %d forms, want none", n)
	}
	if n := a.Refunds(t, order); n != 0 {
		t.Fatalf("refunds = %d after a stale approval, want none", n)
	}

	admin := openTab(t, a, true)
	admin.signIn("admin")
	admin.do("approve the escalated turn", stepTimeout, chromedp.Click(chromedp.CSS(sel+` button[name="decision"][value="approve"]`)))
	flash := admin.landOnInbox(sel, settleTimeout)
	if want := fmt.Sprintf("You approved refund_order; run %d completed: the agent finished.", paused.RunID); flash != want {
		t.Errorf("admin's flash = %q, want %q", flash, want)
	}
	if n := a.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
}
