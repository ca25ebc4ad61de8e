package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Two operators have the inbox open. While the approver types a reason
// into one card, the admin approves another run in their own tab: the
// approver's page shows that run leave with "approved by admin" and the
// count go down, then a run that starts waiting gets its card within 2 s
// and the count goes up — and the half-typed reason is still there, and
// the typing goes on into it. Without JavaScript a reload shows the same.
func TestBrowserInboxFollowsTheFeedWithoutLosingTypedText(t *testing.T) {
	a := newApp(t, 0)
	first, _ := a.Waiting(t, "refund")
	second, _ := a.Waiting(t, "refund")
	typist, decider := openTab(t, a, true), openTab(t, a, true)
	typist.signIn("approver")
	decider.signIn("admin")
	reason := runSelector(second.RunID) + ` textarea[name="reason"]`
	typist.do("start typing a reason", stepTimeout,
		chromedp.WaitVisible(chromedp.CSS(runSelector(first.RunID))),
		chromedp.SendKeys(chromedp.CSS(reason), "half a rea"))

	decider.do("approve the first run", stepTimeout,
		chromedp.Click(chromedp.CSS(runSelector(first.RunID)+` button[name="decision"][value="approve"]`)))
	gone := fmt.Sprintf(`[data-testid="decided-elsewhere"][data-run-id="%d"]`, first.RunID)
	typist.do("see the first run decided elsewhere", settleTimeout, chromedp.WaitVisible(chromedp.CSS(gone)))
	if got, want := text(typist, gone), fmt.Sprintf("Run #%d approved by admin.", first.RunID); got != want {
		t.Errorf("the decided card says %q, want %q", got, want)
	}
	if got := text(typist, `[data-testid="inbox-total"]`); !strings.HasPrefix(got, "1 run waits") {
		t.Errorf("count = %q after the decision elsewhere, want 1 run waits", got)
	}

	third, _ := a.Waiting(t, "refund")
	waited := time.Now()
	typist.do("see the new run's card", 2*time.Second, chromedp.WaitVisible(chromedp.CSS(runSelector(third.RunID))))
	t.Logf("the new card appeared %s after the run paused", time.Since(waited).Round(time.Millisecond))
	if got := text(typist, `[data-testid="inbox-total"]`); !strings.HasPrefix(got, "2 runs wait") {
		t.Errorf("count = %q after a new run waits, want 2 runs wait", got)
	}
	if !get(typist, "see where the focus is", chromedp.Evaluate[bool](`document.activeElement.matches(`+jsString(reason)+`)`)) {
		t.Errorf("the focus left the reason being typed while the page changed")
	}
	typist.do("type on", stepTimeout, chromedp.SendKeys(chromedp.CSS(reason), "son"))
	if got := get(typist, "read the reason", chromedp.Value(chromedp.CSS(reason))); got != "half a reason" {
		t.Errorf("the reason reads %q, want %q: the page lost what was typed", got, "half a reason")
	}
	// What came and went is announced (the cards' container is a polite
	// live region), and the page as it changed is still accessible.
	if got := get(typist, "read the cards' live region", chromedp.Evaluate[string](
		`document.querySelector('[data-testid="inbox-cards"]').getAttribute('aria-live')`)); got != "polite" {
		t.Errorf("the inbox's cards are aria-live=%q, want polite", got)
	}
	typist.wantAccessible("the inbox after the feed changed it")

	plain := openTab(t, a, false)
	plain.signIn("approver")
	plain.do("see the inbox as a reload shows it", stepTimeout,
		chromedp.WaitVisible(chromedp.CSS(runSelector(third.RunID))),
		chromedp.WaitNotPresent(chromedp.CSS(runSelector(first.RunID))))
	if got := text(plain, `[data-testid="inbox-total"]`); !strings.HasPrefix(got, "2 runs wait") {
		t.Errorf("count without JavaScript = %q, want 2 runs wait", got)
	}
}

// The run page and the history follow the feed too: the run page's status
// line follows its run, with a notice to reload for the rest; the history
// updates the rows it shows and says when a run is new.
func TestBrowserRunPageAndHistoryFollowTheFeed(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "refund")
	b := openTab(t, a, true)
	b.signIn("owner")
	status := `[data-testid="run-summary"] [data-testid="run-status"]`
	b.do("open the run page", stepTimeout, chromedp.Navigate(b.base+runPath(paused.RunID, "")),
		chromedp.WaitVisible(chromedp.CSS(status)), loaded())
	if got := text(b, status); got != "waiting_for_approval" {
		t.Fatalf("status = %q before the decision", got)
	}
	a.Approve(t, paused)
	b.do("see the run change", settleTimeout, chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-changed"]`)))
	get(b, "wait for the run's last status", chromedp.Poll[bool](
		`document.querySelector('[data-testid="run-summary"]').dataset.status === "completed"`, chromedp.WithPollingTimeout(stepTimeout)))
	if got := text(b, status); got != "completed" {
		t.Errorf("status line = %q after the run settled, want completed", got)
	}

	b.do("open the history", stepTimeout, chromedp.Navigate(b.base+"/runs"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="history"]`)), loaded())
	next, _ := a.Waiting(t, "refund")
	b.do("see that a run is new", settleTimeout, chromedp.WaitVisible(chromedp.CSS(`[data-testid="history-new"]`)))
	if n := get(b, "count the rows", chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('[data-testid="history-run"][data-run-id="%d"]').length`, next.RunID))); n != 0 {
		t.Errorf("the new run has %d rows before a reload, want none (the notice says to reload)", n)
	}
}
