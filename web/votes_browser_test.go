package web_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
)

// An inbox open on a turn that needs two approvals counts a vote made
// elsewhere without a reload (the feed's voted change), and what was typed
// into the card stays.
func TestBrowserInboxCountsVotesAsTheyCome(t *testing.T) {
	a := newVotesApp(t)
	paused, _ := a.Waiting(t, "votes")
	tab := openTab(t, a, true)
	tab.signIn("approver2")
	votes := runSelector(paused.RunID) + ` [data-testid="votes"]`
	reason := runSelector(paused.RunID) + ` textarea[name="reason"]`
	tab.do("see the card and start typing a reason", stepTimeout,
		chromedp.WaitVisible(chromedp.CSS(votes)),
		chromedp.SendKeys(chromedp.CSS(reason), "looks fine"))
	if got := text(tab, votes); got != "0 of 2 approvals" {
		t.Fatalf("the card counts %q before any vote, want 0 of 2 approvals", got)
	}

	a.bearer(t, "approver", runtime.ScopeRunDecide).call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"),
		approveBody(t, paused.Digest), nil).wantKeys(t, http.StatusOK, "status")
	voted := time.Now()
	get(tab, "see the vote counted", chromedp.Poll[bool](
		`(() => { const e = document.querySelector(`+jsString(votes)+`); return !!e && e.textContent === "1 of 2 approvals: approver"; })()`,
		chromedp.WithPollingInterval(50*time.Millisecond)))
	t.Logf("the card counted the vote %s after it was made", time.Since(voted).Round(time.Millisecond))
	if got := get(tab, "read the reason", chromedp.Value(chromedp.CSS(reason))); got != "looks fine" {
		t.Errorf("the reason reads %q after the count changed, want it as typed", got)
	}
}
