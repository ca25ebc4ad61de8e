package web_test

// The accessibility check: axe-core (web/testdata/axe, pinned) runs in
// Chromium on every page the server renders, for each role that sees it,
// at a desktop width and at 390 px, against WCAG 2.1 A and AA and axe's
// best practices. Any violation fails the test, named with its rule, the
// page and the elements. Run it alone with
//
//	TURNSTILE_DSN='root@tcp(127.0.0.1:3306)/' go test -count=1 -run TestAccessibility ./web/

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
)

// axeVersion is the axe-core the check runs: web/testdata/axe says how to
// change it.
const axeVersion = "4.14.1"

// axeSource is axe.min.js, read once per test binary.
var axeSource = sync.OnceValues(func() (string, error) {
	b, err := os.ReadFile("testdata/axe/axe.min.js")
	return string(b), err
})

// axeTags are the rule sets the pages must pass.
var axeTags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"}

// widths are the viewports each page is checked at: a desktop, and a
// phone's 390 px.
var widths = []int64{1280, 390}

// axeViolation is one rule a page breaks, with the elements that break it.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

func (v axeViolation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %s", v.ID, v.Impact, v.Help)
	for _, n := range v.Nodes {
		fmt.Fprintf(&b, "\n\t\t%v %s", n.Target, n.HTML)
	}
	return b.String()
}

// audit runs axe-core on the page the tab shows and returns what it
// found, and the number of h1 elements (exactly one on every page).
func (b *tab) audit() ([]axeViolation, int) {
	b.t.Helper()
	src, err := axeSource()
	if err != nil {
		b.t.Fatalf("read axe-core: %v", err)
	}
	tags, _ := json.Marshal(axeTags)
	if !b.js {
		// axe-core needs timers, which a tab without scripts does not
		// run; the page's own scripts were skipped when it loaded and
		// stay so.
		b.do("let axe-core run", stepTimeout, scripts(true))
		defer b.do("turn scripts off again", stepTimeout, scripts(false))
	}
	// axe is injected through the DevTools protocol, which the page's
	// Content Security Policy does not govern: the pages stay as served.
	get(b, "inject axe-core", chromedp.Evaluate[bool](`if (!window.axe) {`+src+`}; true`))
	if got := get(b, "read the axe version", chromedp.Evaluate[string](`axe.version`)); got != axeVersion {
		b.t.Fatalf("axe-core is %s, want %s", got, axeVersion)
	}
	out := get(b, "run axe-core", chromedp.Evaluate[string](`axe.run(document, {runOnly: {type: "tag", values: `+string(tags)+`}})
		.then((r) => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise))
	var vs []axeViolation
	if err := json.Unmarshal([]byte(out), &vs); err != nil {
		b.t.Fatalf("axe-core's answer: %v\n%s", err, out)
	}
	h1 := get(b, "count the h1", chromedp.Evaluate[int](`document.querySelectorAll("h1").length`))
	return vs, h1
}

// a11yPage is one page as one role sees it: where it is, and what to wait
// for before checking it.
type a11yPage struct {
	role, path, ready string
}

// TestAccessibility checks every page the server renders, for each role
// that sees it, at each width, with page scripts on (what most people
// get; the pages without scripts render the same markup).
func TestAccessibility(t *testing.T) {
	a := newApp(t, 0)
	waiting, _ := a.Waiting(t, "refund")
	input, _ := a.Waiting(t, "input")
	fourEyes := a.start(t, "four-eyes", "owner", runtime.OriginInteractive)
	settled := a.settledRun(t, "owner")
	decided, _ := a.Waiting(t, "refund")
	a.Approve(t, decided)
	perCall, _ := a.Waiting(t, "percall")
	mixed, _ := a.Waiting(t, "percall")
	lookup, refund := twoCalls(t, mixed)
	a.Decide(t, runtime.DecideRequest{RunID: mixed.RunID, Digest: mixed.Digest, Decision: runtime.DecisionMixed,
		Calls: map[string]runtime.CallDecision{lookup: {Decision: runtime.DecisionApprove},
			refund: {Decision: runtime.DecisionDeny, Reason: "not eligible"}}})

	run := func(id int64) string { return fmt.Sprint(id) }
	main := `main`
	pages := []a11yPage{
		{"", "/login", `#username`},
		{"", "/no-such-page", main},
		{"admin", "/inbox", runSelector(waiting.RunID)},
		{"admin", "/inbox/runs/" + run(waiting.RunID), runSelector(waiting.RunID)},
		{"admin", "/inbox/runs/" + run(input.RunID), runSelector(input.RunID)},
		{"admin", "/inbox/runs/" + run(decided.RunID), `[data-testid="decided"]`},
		{"admin", "/runs", main},
		{"admin", "/runs/" + run(settled), `[data-testid="followup-content"]`},
		{"admin", "/runs/" + run(waiting.RunID), main},
		{"admin", "/runs/" + run(settled) + "/erase", main},
		{"admin", "/playground", main},
		{"approver", "/inbox", runSelector(waiting.RunID)},
		{"approver", "/inbox/runs/" + run(fourEyes.RunID), runSelector(fourEyes.RunID)},
		{"approver", "/inbox/runs/" + run(perCall.RunID), `[data-testid="call-choices"]`},
		{"owner", "/runs/" + run(mixed.RunID), `[data-testid="step-per-call"]`},
		{"approver", "/runs", main},
		{"owner", "/inbox", main},
		{"owner", "/runs", main},
		{"owner", "/runs/" + run(settled), `[data-testid="followup-content"]`},
		{"owner", "/runs/" + run(settled) + "/erase", main},
		{"other", "/inbox", main},
		{"other", "/runs/" + run(settled), main}, // not theirs: the 404 page
	}
	// One tab per role, signed in once; the page checks are its subtests.
	tabs := map[string]*tab{}
	for _, p := range pages {
		if tabs[p.role] == nil {
			tabs[p.role] = openTab(t, a, true)
			if p.role != "" {
				tabs[p.role].signIn(p.role)
			}
		}
	}
	for _, p := range pages {
		for _, width := range widths {
			t.Run(fmt.Sprintf("%s %s at %d px", roleName(p.role), p.path, width), func(t *testing.T) {
				b := tabs[p.role]
				b.t = t
				b.do("open "+p.path, stepTimeout,
					chromedp.EmulateViewport(width, 800),
					chromedp.Navigate(b.base+p.path),
					chromedp.WaitVisible(chromedp.CSS(p.ready)),
					loaded(),
				)
				b.wantAccessible(p.path)
			})
		}
	}
}

// wantAccessible fails the test for each violation axe-core finds on the
// page the tab shows, and unless it has exactly one h1.
func (b *tab) wantAccessible(what string) {
	b.t.Helper()
	vs, h1 := b.audit()
	for _, v := range vs {
		b.t.Errorf("%s\n\t%s", what, v)
	}
	if h1 != 1 {
		b.t.Errorf("%s has %d h1 elements, want exactly one", what, h1)
	}
}

// TestAccessibilityAfterActions checks the pages a form's answer
// renders: a refused sign-in, an input refused with 422 (no scripts), and
// the playground's outcome, rendered by the server (no scripts) and
// streamed into the page (scripts), at each width.
func TestAccessibilityAfterActions(t *testing.T) {
	a := newApp(t, 0)
	input, _ := a.Waiting(t, "input")
	for _, width := range widths {
		t.Run(fmt.Sprintf("at %d px", width), func(t *testing.T) {
			b := openTab(t, a, false)
			b.do("sign in with a wrong password", stepTimeout,
				chromedp.EmulateViewport(width, 800),
				chromedp.Navigate(b.base+"/login"),
				chromedp.WaitVisible(chromedp.CSS("#username")),
				chromedp.SendKeys(chromedp.CSS("#username"), "approver"),
				chromedp.SendKeys(chromedp.CSS("#password"), "wrong"),
				chromedp.Click(chromedp.CSS(`form[action="/login"] button[type="submit"]`)),
				chromedp.WaitVisible(chromedp.CSS(`[role="alert"], .error, [data-testid="login-error"]`)),
				loaded(),
			)
			b.wantAccessible("a refused sign-in")

			b.signIn("approver")
			sel := runSelector(input.RunID)
			b.do("open the input run", stepTimeout,
				chromedp.Navigate(b.base+"/inbox/runs/"+fmt.Sprint(input.RunID)),
				chromedp.WaitVisible(chromedp.CSS(sel)),
				loaded(),
			)
			submitInvalidAmount(b, sel)
			b.wantAccessible("an input refused with 422")

			for _, js := range []bool{false, true} {
				b := openTab(t, a, js)
				b.signIn("admin")
				b.do("run the refund agent in the playground", settleTimeout,
					chromedp.EmulateViewport(width, 800),
					chromedp.Navigate(b.base+"/playground"),
					chromedp.WaitVisible(chromedp.CSS(`[data-testid="playground-form"]`)),
					loaded(),
					chromedp.SetValue(chromedp.CSS("#playground-configuration"), "refund"),
					chromedp.SendKeys(chromedp.CSS("#playground-prompt"), "Refund ORD-1001"),
					chromedp.Click(chromedp.CSS(`[data-testid="playground-form"] button[type="submit"]`)),
					chromedp.WaitVisible(chromedp.CSS(`[data-testid="playground-outcome"]`)),
					loaded(),
				)
				b.wantAccessible(fmt.Sprintf("the playground's outcome (scripts %v)", js))
			}
		})
	}
}

// TestKeyboardDecision walks one decision with the keyboard alone: Tab
// from the top of the inbox to the card's raw JSON toggle (Enter opens
// it), on to its reason (typed) and its Approve button (Enter), each
// focused element showing a visible focus ring; the run is approved with
// the reason typed.
func TestKeyboardDecision(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "refund")
	b := openTab(t, a, true)
	b.signIn("approver")
	sel := runSelector(paused.RunID)
	b.do("open the inbox", stepTimeout, chromedp.Navigate(b.base+"/inbox"), chromedp.WaitVisible(chromedp.CSS(sel)), loaded())

	b.tabTo(sel + ` details.raw > summary`)
	b.do("open the raw JSON with Enter", stepTimeout, chromedp.KeyEvent("\r"))
	if got := shown(b, sel+` [data-testid="raw-arguments"]`); got != "visible" {
		t.Errorf("after Enter on its toggle the raw JSON is %s, want visible", got)
	}
	b.tabTo(sel + ` textarea[name="reason"]`)
	b.do("type a reason", stepTimeout, chromedp.KeyEvent("by keyboard"))
	b.tabTo(sel + ` button[value="approve"]`)
	b.do("approve with Enter", stepTimeout, chromedp.KeyEvent("\r"))
	b.landOnInbox(sel, settleTimeout)
	r := a.WaitRun(t, paused.RunID, settleTimeout, "completed", func(r *runtime.Run) bool { return r.Status == runtime.StatusCompleted })
	d, err := a.Store.Decision(context.Background(), r.ID, paused.Digest)
	if err != nil || d.Kind != runtime.DecisionApprove {
		t.Fatalf("decision = %+v, %v; want an approval", d, err)
	}
	if d.Reason != "by keyboard" {
		t.Errorf("reason = %q, want the one typed", d.Reason)
	}
}

// tabTo presses Tab until the focused element matches target, and
// checks that it shows its focus ring; tabBackTo, shift+Tab.
func (b *tab) tabTo(target string) { b.t.Helper(); b.tabUntil(target) }

func (b *tab) tabBackTo(target string) {
	b.t.Helper()
	b.tabUntil(target, chromedp.KeyModifiers(chromedp.ModifierShift))
}

func (b *tab) tabUntil(target string, opts ...chromedp.KeyOption) {
	b.t.Helper()
	for range 80 {
		b.do("press Tab", stepTimeout, chromedp.KeyEvent("\t", opts...))
		if get(b, "match the focus", chromedp.Evaluate[bool](`document.activeElement.matches(`+jsString(target)+`)`)) {
			outline := get(b, "read the focus ring", chromedp.Evaluate[string](`getComputedStyle(document.activeElement).outlineStyle`))
			if outline == "none" {
				b.t.Errorf("%s has the focus but shows no focus ring", target)
			}
			return
		}
	}
	b.t.Fatalf("80 presses of Tab never reached %s; the focus is on %s", target,
		get(b, "describe the focus", chromedp.Evaluate[string](`document.activeElement.outerHTML.slice(0, 200)`)))
}

// TestKeyboardBulkAndEdit: a bulk decision and an edited approval, each by
// keyboard alone. Space ticks two cards' checkboxes, shift+Tab goes back
// up to "Approve selected", Enter decides both; then, on a third card,
// Enter unfolds "Edit and approve", the amount is typed over, and Enter
// approves the edited call.
func TestKeyboardBulkAndEdit(t *testing.T) {
	a := newApp(t, 0)
	x, _ := a.Waiting(t, "refund")
	y, _ := a.Waiting(t, "refund")
	b := openTab(t, a, true)
	b.signIn("approver")
	b.do("open the inbox", stepTimeout, chromedp.Navigate(b.base+"/inbox"), chromedp.WaitVisible(chromedp.CSS(runSelector(y.RunID))), loaded())
	for _, out := range []runtime.Outcome{x, y} {
		b.tabTo(bulkBox(out.RunID))
		b.do("tick it with Space", stepTimeout, chromedp.KeyEvent(" "))
	}
	b.tabBackTo(`[data-testid="bulk-approve"]`)
	b.do("approve the selected with Enter", stepTimeout, chromedp.KeyEvent("\r"))
	b.landOnInbox(runSelector(x.RunID), settleTimeout)
	for _, out := range []runtime.Outcome{x, y} {
		a.WaitStatus(t, out.RunID, runtime.StatusCompleted, settleTimeout)
	}

	z, order := a.Waiting(t, "refund")
	form, amount := editSelectors(z.RunID, z.Pending.Calls[0].ID)
	b.do("open the inbox again", stepTimeout, chromedp.Navigate(b.base+"/inbox"), chromedp.WaitVisible(chromedp.CSS(runSelector(z.RunID))), loaded())
	b.tabTo(form + ` summary`)
	b.do("unfold the edit form with Enter", stepTimeout, chromedp.KeyEvent("\r"))
	b.tabTo(amount)
	b.do("type the amount", stepTimeout, chromedp.KeyEvent("1700"))
	b.tabTo(form + ` button[data-testid="edit-approve"]`)
	b.do("approve as edited with Enter", stepTimeout, chromedp.KeyEvent("\r"))
	b.landOnInbox(runSelector(z.RunID), settleTimeout)
	wantSettled(t, a, z.RunID, order)
	if n := a.refundsOf(t, order, 1700); n != 1 {
		t.Errorf("refunds of 1700 cents = %d, want the one with the amount typed", n)
	}
}
