package web_test

// Browser tests of the run page's Erase button: with JavaScript it asks
// in the page (and "Keep it" puts the button back), without it on a page
// of its own; either way the erase lands on the history with a flash and
// the run's row says erased. Every wait is on a condition with a deadline.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
)

// eraseInBrowser opens a completed run's page as its owner, with scripts
// on or off, and returns the tab and the run's id.
func eraseInBrowser(t *testing.T, js bool) (*testApp, *tab, int64) {
	t.Helper()
	a := newApp(t, 0)
	paused := a.start(t, "refund", "owner", runtime.OriginInteractive)
	a.Approve(t, paused)
	b := openTab(t, a, js)
	b.signIn("owner")
	b.do("open the run's page", stepTimeout,
		chromedp.Navigate(b.base+runPath(paused.RunID, "")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="erase-open"]`)),
		loaded(),
	)
	if got := shown(b, `[data-testid="erase-confirm"]`); got != "hidden" {
		t.Errorf("before the button is pressed the confirmation is %s, want hidden", got)
	}
	return a, b, paused.RunID
}

// wantErased waits for the history with the erase's flash and checks the
// run's row there and in the database.
func wantErased(t *testing.T, a *testApp, b *tab, id int64) {
	t.Helper()
	row := fmt.Sprintf(`tr[data-testid="history-run"][data-run-id="%d"]`, id)
	b.do("land on the history", stepTimeout,
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
		chromedp.WaitVisible(chromedp.CSS(row)),
		loaded(),
	)
	b.wantAt("/runs")
	if got := text(b, `[data-testid="flash"]`); !strings.HasPrefix(got, fmt.Sprintf("Run %d was erased", id)) {
		t.Errorf("flash = %q, want it to say run %d was erased", got, id)
	}
	if got := get(b, "read the row's status", chromedp.AttributeValue(chromedp.CSS(row), "data-status")); got.Value != "erased" {
		t.Errorf("the history row's status is %q, want erased", got.Value)
	}
	if n := a.Count(t, `SELECT COUNT(*) FROM runs WHERE id = ? AND erased_at IS NOT NULL AND prompt = ''`, id); n != 1 {
		t.Errorf("run %d is not erased", id)
	}
}

// TestBrowserEraseAsksInThePage: with JavaScript the button opens the
// question beside it, with no request; "Keep it" closes it and erases
// nothing; the second time the erase goes through.
func TestBrowserEraseAsksInThePage(t *testing.T) {
	a, b, id := eraseInBrowser(t, true)
	b.do("press Erase", stepTimeout,
		chromedp.Click(chromedp.CSS(`[data-testid="erase-open"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="erase-confirm"] [data-testid="erase-submit"]`)),
	)
	b.wantAt(runPath(id, ""))
	if got := shown(b, `[data-testid="erase-open"]`); got != "hidden" {
		t.Errorf("while it asks, the Erase button is %s, want hidden", got)
	}
	b.do("keep it", stepTimeout,
		chromedp.Click(chromedp.CSS(`[data-testid="erase-confirm"] [data-testid="erase-keep"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="erase-open"]`)),
		chromedp.WaitNotVisible(chromedp.CSS(`[data-testid="erase-confirm"]`)),
	)
	if n := a.Count(t, `SELECT COUNT(*) FROM runs WHERE erased_at IS NOT NULL`); n != 0 {
		t.Fatalf("keeping the run erased %d", n)
	}
	b.do("press Erase, then erase", stepTimeout,
		chromedp.Click(chromedp.CSS(`[data-testid="erase-open"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="erase-confirm"] [data-testid="erase-submit"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="erase-confirm"] [data-testid="erase-submit"]`)),
	)
	wantErased(t, a, b, id)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, x := range b.exchanges {
		if x.method == "GET" && strings.HasPrefix(x.path, runPath(id, "/erase")) {
			t.Errorf("with a script the question's page was loaded: %s", x.path)
		}
	}
}

// TestBrowserEraseWithoutScriptAsksOnAPage: without JavaScript the
// button opens the question's page, whose form erases the run.
func TestBrowserEraseWithoutScriptAsksOnAPage(t *testing.T) {
	a, b, id := eraseInBrowser(t, false)
	b.do("press Erase", stepTimeout,
		chromedp.Click(chromedp.CSS(`[data-testid="erase-open"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="erase-page"]`)),
		loaded(),
	)
	if got := get(b, "read the location", chromedp.Location()); !strings.HasPrefix(got, b.base+runPath(id, "/erase")) {
		t.Fatalf("the button led to %s, want the question's page", got)
	}
	if got := text(b, `[data-testid="erase-question"]`); !strings.Contains(got, "cannot be undone") {
		t.Errorf("the question says %q", got)
	}
	b.do("erase", stepTimeout, chromedp.Click(chromedp.CSS(`[data-testid="erase-submit"]`)))
	wantErased(t, a, b, id)
}
