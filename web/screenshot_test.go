package web_test

// The console on a 390 px phone screen, and the README's screenshots: both
// drive the demo's own agents (cmd/turnstile/demo) through a seeded state
// that looks like the demo's.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store/testrig"
	"github.com/turnstile-dev/turnstile/web"
)

// demoState is a world seeded like the demo after a little use: one refund
// denied and completed, then a refund, a four-eyes refund and a goodwill
// question waiting, all owned by "user"; "operator" holds the approve
// grant.
type demoState struct {
	*testApp
	denied  int64   // the completed run, denied by operator
	waiting []int64 // oldest first
}

// demoFiles are the demo agents the state uses, as make run seeds them.
var demoFiles = []string{"refund-agent.yaml", "refund-agent-four-eyes.yaml", "input-agent.yaml"}

// seedDemo sets the demo state up. Runs start one after the other, so ids,
// and with them every page's order, are the same at each run.
func seedDemo(t *testing.T) *demoState {
	t.Helper()
	a := newApp(t, 0)
	for _, f := range demoFiles {
		y, err := os.ReadFile(filepath.Join("..", "cmd", "turnstile", "demo", f))
		if err != nil {
			t.Fatalf("the demo's agent: %v", err)
		}
		a.Configure(t, string(y))
	}
	hash, err := web.HashPassword(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, u := range []runtime.User{
		{Name: "operator", Role: runtime.RoleUser, Grants: []string{runtime.GrantApprove}, PasswordHash: hash},
		{Name: "user", Role: runtime.RoleUser, PasswordHash: hash},
	} {
		if err := a.Store.CreateUser(ctx, &u); err != nil {
			t.Fatalf("user %s: %v", u.Name, err)
		}
		a.Users[u.Name] = &u
	}
	if err := a.Store.SeedDemoOrders(ctx, []builtin.Order{
		{ID: "ORD-1001", Customer: "Ada Lovelace", AmountCents: 4999, Currency: "EUR"},
		{ID: "ORD-1002", Customer: "Alan Turing", AmountCents: 12900, Currency: "EUR"},
		{ID: "ORD-1003", Customer: "Grace Hopper", AmountCents: 2350, Currency: "USD"},
		{ID: "ORD-1005", Customer: "Barbara Liskov", AmountCents: 15000, Currency: "USD"},
	}); err != nil {
		t.Fatal(err)
	}
	d := &demoState{testApp: a}
	start := func(cfg, prompt string) runtime.Outcome {
		out, _ := a.Start(t, testrig.Launch{Configuration: cfg, Owner: "user", Prompt: prompt})
		return out
	}
	first := start("refund-agent", "Refund ORD-1005, the customer changed their mind after 45 days.")
	a.Decide(t, runtime.DecideRequest{RunID: first.RunID, Digest: first.Digest, Decision: runtime.DecisionDeny,
		Actor: a.Actor("operator"), Reason: "Outside the 30-day return window."})
	d.denied = first.RunID
	for _, r := range []struct{ cfg, prompt string }{
		{"refund-agent", "Please refund order ORD-1001, it arrived broken."},
		{"refund-agent-four-eyes", "Refund ORD-1002 in full."},
		{"input-agent", "Customer of ORD-1003 waited three weeks."},
	} {
		d.waiting = append(d.waiting, start(r.cfg, r.prompt).RunID)
	}
	return d
}

// overflow describes what sticks out to the right of the viewport: each
// element wider than the page whose parent is not, with its right edge.
const overflow = `(() => {
	const w = document.documentElement.clientWidth;
	const name = (el) => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
		(el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '') +
		(el.dataset && el.dataset.testid ? '[data-testid=' + el.dataset.testid + ']' : '');
	const out = [];
	for (const el of document.querySelectorAll('body *')) {
		const r = el.getBoundingClientRect();
		if (r.width === 0 || r.right <= w + 0.5) continue;
		const p = el.parentElement && el.parentElement.getBoundingClientRect();
		if (p && p.right > w + 0.5) continue;
		out.push(name(el) + ' reaches ' + Math.round(r.right) + ' px (' + (el.innerText || '').replace(/\s+/g, ' ').trim().slice(0, 40) + ')');
	}
	return {scroll: document.documentElement.scrollWidth, width: w, out: out.slice(0, 10)};
})()`

type overflowSeen struct {
	Scroll int      `json:"scroll"`
	Width  int      `json:"width"`
	Out    []string `json:"out"`
}

// narrowTab is a tab with a phone's 390 × 844 viewport.
func narrowTab(t *testing.T, a *testApp, user string) *tab {
	t.Helper()
	b := openTab(t, a, true)
	b.do("emulate a 390 px phone", stepTimeout, chromedp.EmulateViewport(390, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile))
	b.signIn(user)
	return b
}

// wantFits checks that the page shown scrolls no wider than 390 px, naming
// what sticks out when it does.
func wantFits(t *testing.T, b *tab, what string) {
	t.Helper()
	seen := get(b, "measure "+what, chromedp.Evaluate[overflowSeen](overflow))
	if seen.Width != 390 {
		t.Errorf("%s: the viewport is %d px wide, want 390", what, seen.Width)
	}
	if seen.Scroll > 390 {
		t.Errorf("%s scrolls %d px wide at 390 px; sticking out:\n  %s", what, seen.Scroll, strings.Join(seen.Out, "\n  "))
	}
}

// TestConsoleFitsA390PixelScreen: at 390 px wide, the inbox with its cards,
// the run history and a run's page scroll no wider than the screen, and
// Approve shows whole.
func TestConsoleFitsA390PixelScreen(t *testing.T) {
	d := seedDemo(t)
	t.Run("inbox", func(t *testing.T) {
		b := narrowTab(t, d.testApp, "operator")
		wantFits(t, b, "the inbox")
		approve := runSelector(d.waiting[0]) + ` button[name="decision"][value="approve"]`
		b.do("scroll to Approve", stepTimeout, chromedp.ScrollIntoView(chromedp.CSS(approve)))
		if got := shown(b, approve); got != "visible" {
			t.Errorf("Approve is %s, want visible", got)
		}
		box := get(b, "measure Approve", chromedp.Evaluate[[]float64](`((r) => [r.left, r.right])(document.querySelector(`+jsString(approve)+`).getBoundingClientRect())`))
		if box[0] < 0 || box[1] > 390 {
			t.Errorf("Approve spans %v px, want it within 0–390", box)
		}
	})
	t.Run("history", func(t *testing.T) {
		b := narrowTab(t, d.testApp, "user")
		b.do("open the history", stepTimeout, chromedp.Navigate(b.base+"/runs"),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="history"]`)), loaded())
		wantFits(t, b, "the run history")
	})
	t.Run("run", func(t *testing.T) {
		b := narrowTab(t, d.testApp, "user")
		b.do("open the run", stepTimeout, chromedp.Navigate(b.base+runPath(d.denied, "")),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-summary"]`)), loaded())
		wantFits(t, b, "the run's page")
	})
}

// TestScreenshots writes the README's screenshots into the directory
// TURNSTILE_SCREENSHOTS names, and is skipped without it:
//
//	TURNSTILE_SCREENSHOTS=$PWD/web/testdata/screenshots go test ./web -run TestScreenshots -count=1
//
// inbox.png and inbox-390.png are the operator's inbox at 1280 and 390 px,
// run.png the denied run's page and history.png the runs of its owner.
func TestScreenshots(t *testing.T) {
	dir := os.Getenv("TURNSTILE_SCREENSHOTS")
	if dir == "" {
		t.Skip("set TURNSTILE_SCREENSHOTS to a directory to write the README's screenshots there")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := seedDemo(t)
	shoot := func(b *tab, name string) {
		t.Helper()
		png := get(b, "screenshot "+name, chromedp.FullScreenshot(100))
		if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", filepath.Join(dir, name), len(png))
	}
	wide := func(user string) *tab {
		b := openTab(t, d.testApp, true)
		b.do("set a 1280 px window", stepTimeout, chromedp.EmulateViewport(1280, 800))
		b.signIn(user)
		return b
	}

	operator := wide("operator")
	shoot(operator, "inbox.png")
	shoot(narrowTab(t, d.testApp, "operator"), "inbox-390.png")

	user := wide("user")
	user.do("open the history", stepTimeout, chromedp.Navigate(user.base+"/runs"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="history"]`)), loaded())
	shoot(user, "history.png")
	user.do("open the denied run", stepTimeout, chromedp.Navigate(user.base+runPath(d.denied, "")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-summary"]`)), loaded())
	shoot(user, "run.png")
	if n := d.Refunds(t, "ORD-1005"); n != 0 {
		t.Errorf("the denied refund was written %d times", n)
	}
}
