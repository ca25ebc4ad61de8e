package web_test

// Browser tests of the operator's console (issue 13), in headless Chromium
// with JavaScript on and off: what a person types survives a run that
// continues in the background, a denial's flash says what it did, the card
// shows the tool's own preview, the history and the inbox reach their
// second pages, and a decision without JavaScript ends on a page that shows
// its outcome. Nothing here sleeps: every wait is on a condition, with a
// deadline.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
	"github.com/turnstile-dev/turnstile/web"
)

// longConfig is a refund whose continuation then works silently for the
// given seconds: a run that continues in the background for as long as a
// test needs it to, without the test sleeping.
func longConfig(identifier string, seconds int) string {
	return fmt.Sprintf(`
identifier: %s
name: Long %s
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - tool_calls: [{name: slow_task, arguments: {seconds: %d, label: "long"}}]
      - text: "done"
tools: [refund_order, slow_task]
`, identifier, identifier, seconds)
}

// honestConfig is a refund whose agent says what it is about to do, and
// answers a denial as the demo agents do: by saying that nothing was
// refunded.
const honestConfig = `
identifier: honest
name: Honest refund
provider:
  type: scripted
  script:
    rounds:
      - text: "MARKER-SAID I will refund it in full."
        tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}", reason: "MARKER-ARG"}}]
      - text: "The refund is done."
        if_denied:
          text: "The refund was denied, so nothing was refunded."
tools: [refund_order]
`

// requests returns copies of the tab's exchanges with the method and path,
// of the kind ("" for any), in order.
func (b *tab) requests(method, path string, kind network.ResourceType) []exchange {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []exchange
	for _, x := range b.exchanges {
		if x.method == method && x.path == path && (kind == "" || x.kind == kind) {
			out = append(out, *x)
		}
	}
	return out
}

// answered counts the exchanges answered with the status.
func answered(xs []exchange, status int64) int {
	n := 0
	for _, x := range xs {
		if x.status == status {
			n++
		}
	}
	return n
}

// peek evaluates an expression and answers its error instead of failing
// the test: for waits across a reload, when the page may be between
// documents.
func peek[T any](b *tab, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// waitFor asks ok until it says yes and fails the test, saying where the
// tab is, when it does not within d.
func (b *tab) waitFor(what string, d time.Duration, ok func() bool) {
	b.t.Helper()
	if !testrig.Eventually(d, ok) {
		b.t.Fatalf("%s: not within %s\n%s", what, d, b.where())
	}
}

// jsString quotes s for an expression.
func jsString(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// shown tells how an element is to a person: "absent" (not in the DOM),
// "hidden" (in the DOM but without a box, or hidden by CSS, as the inside
// of a closed <details>) or "visible".
func shown(b *tab, sel string) string {
	b.t.Helper()
	return get(b, "see whether "+sel+" shows", chromedp.Evaluate[string](`((el) => {
		if (!el) return 'absent';
		const r = el.getBoundingClientRect();
		const on = el.checkVisibility({opacityProperty: true, visibilityProperty: true});
		return on && r.width > 0 && r.height > 0 ? 'visible' : 'hidden';
	})(document.querySelector(`+jsString(sel)+`))`))
}

// text is an element's text as shown, trimmed.
func text(b *tab, sel string) string {
	b.t.Helper()
	return strings.TrimSpace(get(b, "read "+sel, chromedp.Text(chromedp.CSS(sel))))
}

// eachJS runs f as a subtest with JavaScript on, then off.
func eachJS(t *testing.T, f func(t *testing.T, js bool)) {
	for _, js := range []bool{true, false} {
		name := "js"
		if !js {
			name = "no-js"
		}
		t.Run(name, func(t *testing.T) { f(t, js) })
	}
}

// TestConsoleTypingSurvivesAContinuingRun: with JavaScript, a run the user
// decided continues in the background (a worker runs its 13-second tool)
// while they write a reason for another run. inbox.js refreshes the
// "continuing" part at least three times, and finally sees the run gone,
// yet the page is never reloaded and the reason stays as typed, focused.
// Without JavaScript the inbox has no refresh at all.
func TestConsoleTypingSurvivesAContinuingRun(t *testing.T) {
	a := newApp(t, 0, func(d *web.Deps) { d.DecisionPath = web.PathDurable })
	a.Configure(t, longConfig("long", 13))
	bg, _ := a.Waiting(t, "long")
	other, _ := a.Waiting(t, "refund")
	testrig.Work(t, a.Engine, 1, 20*time.Millisecond)

	b := openTab(t, a, true)
	b.signIn("approver")
	b.do("approve the long run", stepTimeout, chromedp.Click(chromedp.CSS(runSelector(bg.RunID)+` button[name="decision"][value="approve"]`)))
	if got, want := b.landOnInbox(runSelector(bg.RunID), stepTimeout), fmt.Sprintf("Decision recorded; run %d continues in the background.", bg.RunID); got != want {
		t.Errorf("flash = %q, want %q", got, want)
	}
	listed := fmt.Sprintf(`[data-continuing] [data-testid="continuing-run"][data-run-id="%d"]`, bg.RunID)
	b.do("see the run continuing", stepTimeout, chromedp.WaitVisible(chromedp.CSS(listed)))

	// Without JavaScript the same inbox links the continuing run to its
	// page, and nothing reloads it.
	plain := openTab(t, a, false)
	plain.signIn("approver")
	if got := shown(plain, listed+fmt.Sprintf(` a[href="/inbox/runs/%d"]`, bg.RunID)); got != "visible" {
		t.Errorf("without JavaScript the link to the continuing run is %s, want visible", got)
	}
	if n := get(plain, "count refreshes", chromedp.Evaluate[int](`document.querySelectorAll('meta[http-equiv="refresh"]').length`)); n != 0 {
		t.Error("without JavaScript the inbox reloads itself")
	}

	reason := fmt.Sprintf("#run-%d-reason", other.RunID)
	const typed = "half-written: the customer called twice about"
	b.do("type a reason", stepTimeout,
		// A reload would drop this mark along with the document.
		chromedp.Evaluate[chromedp.Void](`window.__turnstileMark = 'same document'`),
		chromedp.SendKeys(chromedp.CSS(reason), typed))
	typedAt := time.Now()
	loads := len(b.requests("GET", "/inbox", network.ResourceTypeDocument))
	polls := answered(b.requests("GET", "/inbox/continuing", ""), 200)

	wantKept := func(when string) {
		t.Helper()
		if got := get(b, "read the reason", chromedp.Value(chromedp.CSS(reason))); got != typed {
			t.Errorf("%s the reason reads %q, want %q as typed", when, got, typed)
		}
		if got := get(b, "read the focus", chromedp.Evaluate[string](`document.activeElement ? document.activeElement.id : ''`)); "#"+got != reason {
			t.Errorf("%s the focus is on %q, want the reason still", when, got)
		}
		if got := get(b, "read the mark", chromedp.Evaluate[string](`String(window.__turnstileMark)`)); got != "same document" {
			t.Errorf("%s the page was reloaded: the document is new", when)
		}
		if n := len(b.requests("GET", "/inbox", network.ResourceTypeDocument)); n != loads {
			t.Errorf("%s the inbox was loaded %d more times", when, n-loads)
		}
	}
	b.waitFor("three refreshes of the continuing part", 20*time.Second, func() bool {
		return answered(b.requests("GET", "/inbox/continuing", ""), 200) >= polls+3
	})
	if r := a.Run(t, bg.RunID); r.Status != runtime.StatusRunning {
		t.Errorf("after three refreshes the run is %s, want still running (the test watched too long)", r.Status)
	}
	if shown(b, listed) != "visible" {
		t.Error("a refresh dropped the run while it was still running")
	}
	wantKept("after three refreshes")

	a.WaitStatus(t, bg.RunID, runtime.StatusCompleted, settleTimeout)
	b.do("see the run leave the continuing part", 2*stepTimeout, chromedp.WaitNotPresent(chromedp.CSS(listed)))
	wantKept("once the run is done")
	if d := time.Since(typedAt); d < 10*time.Second {
		t.Errorf("the reason was watched for %s, want at least 10 s", d)
	}
	refreshes := b.requests("GET", "/inbox/continuing", "")
	for _, x := range refreshes {
		if x.kind != network.ResourceTypeFetch {
			t.Errorf("a refresh went as %s, want the script's fetch", x.kind)
		}
	}
	t.Logf("%d refreshes of the continuing part; the reason survived %s", len(refreshes), time.Since(typedAt).Round(100*time.Millisecond))

}

// TestConsoleDenialFlash: a denial through the inbox flashes what it did
// and how the run ended; nothing is refunded, the decider's history shows
// the denial, and the owner reads the agent's answer saying so.
func TestConsoleDenialFlash(t *testing.T) {
	a := newApp(t, 0)
	a.Configure(t, honestConfig)
	eachJS(t, func(t *testing.T, js bool) {
		paused, order := a.Waiting(t, "honest")
		sel := runSelector(paused.RunID)
		b := openTab(t, a, js)
		b.signIn("approver")
		b.do("deny with a reason", stepTimeout,
			chromedp.SendKeys(chromedp.CSS(fmt.Sprintf("#run-%d-reason", paused.RunID)), "not eligible"),
			chromedp.Click(chromedp.CSS(sel+` button[name="decision"][value="deny"]`)))
		if got, want := b.landOnInbox(sel, settleTimeout), fmt.Sprintf("You denied refund_order; run %d completed: the agent finished.", paused.RunID); got != want {
			t.Errorf("flash = %q, want %q", got, want)
		}
		if n := a.Refunds(t, order); n != 0 {
			t.Errorf("refunds of %s = %d after a denial, want 0", order, n)
		}
		if ds := a.Decisions(t, paused.RunID); len(ds) != 1 || ds[0].Kind != runtime.DecisionDeny {
			t.Errorf("decisions = %+v, want one denial", ds)
		}

		b.do("open the history", stepTimeout,
			chromedp.Click(chromedp.CSS(`[data-testid="nav-runs"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="history"]`)), loaded())
		row := fmt.Sprintf(`[data-testid="history-run"][data-run-id="%d"]`, paused.RunID)
		if got := get(b, "read the row's status", chromedp.AttributeValue(chromedp.CSS(row), "data-status")); got.Value != "completed" {
			t.Errorf("the history shows the run %q, want completed", got.Value)
		}
		if got := text(b, row); !strings.Contains(got, "denied") {
			t.Errorf("the history's row = %q, want the denial in it", got)
		}

		owner := openTab(t, a, js)
		owner.signIn("owner")
		owner.do("open the run", stepTimeout, chromedp.Navigate(owner.base+runPath(paused.RunID, "")),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-summary"]`)), loaded())
		if got := text(owner, "main"); !strings.Contains(got, "nothing was refunded") || strings.Contains(got, "The refund is done") {
			t.Errorf("the run's page does not say that nothing was refunded:\n%s", got)
		}
	})
}

// TestConsoleCardShowsItsPreview: the card shows, visibly, the tool's
// description, the preview the tool wrote of this call and the arguments
// as a table; the raw JSON shows only once its toggle is clicked open. The
// prompt and what the model said show to the run's owner, not to a holder
// of the approve grant alone.
func TestConsoleCardShowsItsPreview(t *testing.T) {
	a := newApp(t, 0)
	a.Configure(t, honestConfig)
	paused, order := a.Waiting(t, "honest")
	sel := runSelector(paused.RunID)
	check := func(t *testing.T, js bool, user string, wantContext bool) {
		b := openTab(t, a, js)
		b.signIn(user)
		for _, id := range []string{"preview", "tool-description", "arguments", "run-owner"} {
			if got := shown(b, sel+` [data-testid="`+id+`"]`); got != "visible" {
				t.Errorf("%s is %s, want visible", id, got)
			}
		}
		if got, want := text(b, sel+` [data-testid="preview"]`), "Refund 42.00 EUR of "+order+" to MARKER-CUSTOMER (MARKER-ARG)"; got != want {
			t.Errorf("preview = %q, want %q", got, want)
		}
		if got := text(b, sel+` [data-testid="tool-description"]`); !strings.HasPrefix(got, "Refund an order") {
			t.Errorf("tool description = %q", got)
		}
		rows := get(b, "read the arguments", chromedp.Evaluate[[][]string](`Array.from(document.querySelectorAll(`+
			jsString(sel+` [data-testid="arguments"] > tbody > tr`)+`)).map((tr) => [tr.cells[0].textContent.trim(), tr.cells[1].textContent.trim()])`))
		if want := [][]string{{"order_id", order}, {"reason", "MARKER-ARG"}}; !slices.EqualFunc(rows, want, slices.Equal) {
			t.Errorf("argument rows = %q, want %q", rows, want)
		}
		for id, want := range map[string]string{"run-prompt": "Refund " + order, "run-said": "MARKER-SAID I will refund it in full."} {
			got := shown(b, sel+` [data-testid="`+id+`"]`)
			switch {
			case !wantContext && got != "absent":
				t.Errorf("%s is %s to %s, want absent", id, got, user)
			case wantContext && got != "visible":
				t.Errorf("%s is %s to %s, want visible", id, got, user)
			case wantContext && text(b, sel+` [data-testid="`+id+`"]`) != want:
				t.Errorf("%s = %q, want %q", id, text(b, sel+` [data-testid="`+id+`"]`), want)
			}
		}

		raw := sel + ` [data-testid="raw-arguments"]`
		if got := shown(b, raw); got != "hidden" {
			t.Errorf("before its toggle the raw JSON is %s, want hidden", got)
		}
		b.do("open the raw JSON", stepTimeout, chromedp.Click(chromedp.CSS(sel+` details.raw > summary`)))
		if got := shown(b, raw); got != "visible" {
			t.Errorf("after its toggle the raw JSON is %s, want visible", got)
		}
		if got := text(b, raw); !strings.Contains(got, `"order_id": "`+order+`"`) {
			t.Errorf("raw JSON = %q", got)
		}
	}
	eachJS(t, func(t *testing.T, js bool) { check(t, js, "approver", false) })
	t.Run("owner", func(t *testing.T) { check(t, true, "owner", true) })
}

// rowIDs are the run ids of the rows or cards a selector finds, in order.
func rowIDs(b *tab, sel string) []int64 {
	b.t.Helper()
	return get(b, "read the run ids", chromedp.Evaluate[[]int64](`Array.from(document.querySelectorAll(`+jsString(sel)+
		`)).map((el) => Number(el.getAttribute('data-run-id')))`))
}

// TestConsoleHistoryHasTwoPages: of 52 runs, /runs shows the 50 newest,
// newest first, and "Older runs" the other 2, with no further link.
func TestConsoleHistoryHasTwoPages(t *testing.T) {
	a := newApp(t, 0)
	var ids []int64
	for range 52 {
		o, _ := a.Waiting(t, "refund")
		ids = append(ids, o.RunID)
	}
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	const rows = `[data-testid="history-run"]`
	eachJS(t, func(t *testing.T, js bool) {
		b := openTab(t, a, js)
		b.signIn("owner")
		b.do("open the history", stepTimeout,
			chromedp.Click(chromedp.CSS(`[data-testid="nav-runs"]`)),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="history"]`)), loaded())
		if got := rowIDs(b, rows); !slices.Equal(got, newest[:50]) {
			t.Errorf("the first page lists %v, want %v", got, newest[:50])
		}
		b.do("open the older runs", stepTimeout,
			chromedp.Click(chromedp.CSS(`[data-testid="history-next"]`)),
			chromedp.WaitNotPresent(chromedp.CSS(fmt.Sprintf(`%s[data-run-id="%d"]`, rows, newest[0]))), loaded())
		if got := rowIDs(b, rows); !slices.Equal(got, newest[50:]) {
			t.Errorf("the second page lists %v, want %v", got, newest[50:])
		}
		if got := shown(b, `[data-testid="history-next"]`); got != "absent" {
			t.Errorf("the last page's next link is %s, want absent", got)
		}
	})
}

// TestConsoleInboxSecondPage: of 53 waiting runs, the inbox shows the 50
// oldest, and "Next page" runs 51 to 53; both say that 53 wait.
func TestConsoleInboxSecondPage(t *testing.T) {
	a := newApp(t, 0)
	var ids []int64
	for range 53 {
		o, _ := a.Waiting(t, "refund")
		ids = append(ids, o.RunID)
	}
	const cards = `article[data-testid="inbox-run"]`
	const total = "53 runs wait for a decision, oldest first."
	eachJS(t, func(t *testing.T, js bool) {
		b := openTab(t, a, js)
		b.signIn("approver")
		if got := rowIDs(b, cards); !slices.Equal(got, ids[:50]) {
			t.Errorf("the first page shows %v, want %v", got, ids[:50])
		}
		if got := text(b, `[data-testid="inbox-total"]`); got != total {
			t.Errorf("the first page's total = %q, want %q", got, total)
		}
		b.do("open the next page", stepTimeout,
			chromedp.Click(chromedp.CSS(`[data-testid="inbox-next"]`)),
			chromedp.WaitNotPresent(chromedp.CSS(runSelector(ids[0]))), loaded())
		if got := rowIDs(b, cards); !slices.Equal(got, ids[50:]) {
			t.Errorf("the second page shows %v, want %v", got, ids[50:])
		}
		if got := text(b, `[data-testid="inbox-total"]`); got != total {
			t.Errorf("the second page's total = %q, want %q", got, total)
		}
		if got := shown(b, `[data-testid="inbox-next"]`); got != "absent" {
			t.Errorf("the last page's next link is %s, want absent", got)
		}
	})
}

// TestConsoleNativeDecisionEndsOnItsOutcome: without JavaScript, on the
// durable path with a worker, Approve lands on the run's own decision page,
// which has no form and reloads itself while the run's 3-second tool runs,
// and ends showing how the run ended, with a link back to the inbox.
func TestConsoleNativeDecisionEndsOnItsOutcome(t *testing.T) {
	a := newApp(t, 0, func(d *web.Deps) { d.DecisionPath = web.PathDurable })
	a.Configure(t, longConfig("long", 3))
	paused, order := a.Waiting(t, "long")
	testrig.Work(t, a.Engine, 1, 20*time.Millisecond)
	b := openTab(t, a, false)
	b.signIn("approver")
	page := fmt.Sprintf("/inbox/runs/%d", paused.RunID)
	const summary = `[data-testid="decided-summary"]`
	forms := func() int {
		return get(b, "count the page's forms", chromedp.Evaluate[int](`document.querySelectorAll('main form').length`))
	}
	refreshes := func() int {
		return get(b, "count refreshes", chromedp.Evaluate[int](`document.querySelectorAll('meta[http-equiv="refresh"]').length`))
	}

	b.do("approve", stepTimeout,
		chromedp.Click(chromedp.CSS(runSelector(paused.RunID)+` button[name="decision"][value="approve"]`)),
		chromedp.WaitVisible(chromedp.CSS(summary)), loaded())
	b.wantAt(page)
	if got, want := text(b, summary), fmt.Sprintf("You approved refund_order; run %d continues…", paused.RunID); got != want {
		t.Errorf("on landing the page says %q, want %q", got, want)
	}
	if n := refreshes(); n != 1 {
		t.Errorf("while the run continues the page has %d refreshes, want 1", n)
	}
	if n := forms(); n != 0 {
		t.Errorf("the page that reloads itself has %d forms, want none", n)
	}

	want := fmt.Sprintf("You approved refund_order; run %d completed: the agent finished.", paused.RunID)
	b.waitFor("see the outcome", settleTimeout, func() bool {
		got, err := peek[string](b, `((el) => el ? el.textContent.trim() : '')(document.querySelector(`+jsString(summary)+`))`)
		return err == nil && got == want
	})
	b.do("let the outcome page load", stepTimeout, loaded())
	b.wantAt(page)
	if n := refreshes(); n != 0 {
		t.Errorf("the outcome page has %d refreshes, want none", n)
	}
	if n := forms(); n != 0 {
		t.Errorf("the outcome page has %d forms, want none", n)
	}
	loads := b.requests("GET", page, network.ResourceTypeDocument)
	if len(loads) < 2 {
		t.Errorf("the decision page was loaded %d times, want it to have reloaded itself", len(loads))
	}
	if posts := b.posts(inboxPath(paused.RunID, "decision")); len(posts) != 1 || posts[0].kind != network.ResourceTypeDocument || posts[0].status != 303 {
		t.Errorf("decision requests = %+v, want one native form POST answered 303", posts)
	}
	wantSettled(t, a, paused.RunID, order)
	t.Logf("the decision page loaded %d times", len(loads))

	b.do("go back to the inbox", stepTimeout,
		chromedp.Click(chromedp.CSS(`[data-testid="back-to-inbox"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="inbox-empty"]`)), loaded())
	b.wantAt("/inbox")
}
