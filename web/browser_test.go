package web_test

// Browser tests: headless Chromium drives the inbox through the real web
// layer on real MySQL, with JavaScript (inbox.js streams the decision and
// shows a step counter) and without it (plain POSTs, 303 and flash). One
// browser serves the whole test binary; every test gets a tab in a browser
// context of its own, so cookies never leak between tests.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
)

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

const (
	// stepTimeout bounds one group of browser actions or one wait.
	stepTimeout = 10 * time.Second
	// settleTimeout bounds a wait that includes a whole continuation.
	settleTimeout = 20 * time.Second
	// startTimeout bounds starting the browser or opening a tab.
	startTimeout = 30 * time.Second
)

// shared is the one browser of the test binary, started by the first test
// that needs it and closed by TestMain.
var shared struct {
	once   sync.Once
	ctx    context.Context // a chromedp context whose children are tabs
	cancel context.CancelFunc
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cancel != nil {
		shared.cancel() // stops Chromium and removes its profile directory
	}
	os.Exit(code)
}

// browser returns the shared browser, starting it on first use. Without
// Chromium the test is skipped, except on CI, where it fails.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := exec.LookPath(chromiumPath); err != nil {
		msg := fmt.Sprintf("browser tests need %s from the Debian package chromium (apt-get install -y chromium): %v", chromiumPath, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	shared.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromiumPath),
			// Root (as on these machines) cannot use Chromium's sandbox;
			// the browser only ever loads the test server's pages.
			chromedp.NoSandbox,
			chromedp.Flag("disable-background-networking", true))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelCtx := chromedp.NewContext(alloc)
		shared.ctx = ctx
		shared.cancel = func() { cancelCtx(); cancelAlloc() }
		// The first action on a context binds the browser to that very
		// context, so it gets no deadline of its own: within bounds it.
		shared.err = within(startTimeout, shared.cancel, func() error { return chromedp.Do(ctx) })
	})
	if shared.err != nil {
		t.Fatalf("start %s: %v", chromiumPath, shared.err)
	}
	return shared.ctx
}

// within runs f and gives up after d, calling stop so that f returns.
func within(d time.Duration, stop func(), f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		stop()
		<-done
		return fmt.Errorf("no answer within %s", d)
	}
}

// exchange is one HTTP request of the tab's documents and scripts, with the
// status it got (0 while unanswered). A redirect ends one exchange and
// starts the next.
type exchange struct {
	id     network.RequestID
	method string
	path   string
	kind   network.ResourceType
	accept string
	status int64
}

// tab is one browser tab on a test server.
type tab struct {
	t    *testing.T
	ctx  context.Context
	base string
	js   bool // page scripts run

	mu        sync.Mutex
	exchanges []*exchange
	// refused are the browser's reports of what the pages' Content
	// Security Policy blocked: every page must work under it.
	refused []string
}

// openTab opens a tab on the app's server, with page scripts on or off.
func openTab(t *testing.T, a *testApp, js bool) *tab {
	t.Helper()
	b := &tab{t: t, base: a.srv.URL, js: js}
	ctx, cancel := chromedp.NewContext(browser(t), chromedp.WithNewBrowserContext(), chromedp.WithListener(b.record))
	t.Cleanup(cancel)
	t.Cleanup(func() {
		for _, r := range b.violations() {
			t.Errorf("the Content-Security-Policy blocked something a page needs: %s", r)
		}
	})
	b.ctx = ctx
	err := within(startTimeout, cancel, func() error {
		return chromedp.Do(ctx, scripts(js))
	})
	if err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return b
}

// scripts turns the tab's page scripts on or off.
func scripts(on bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: !on})
		return err
	})
}

// record keeps the tab's requests to the test server. It runs in the tab's
// event loop, so it only takes notes.
func (b *tab) record(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		if ev.RedirectResponse != nil {
			if x := b.last(ev.RequestID); x != nil {
				x.status = ev.RedirectResponse.Status
			}
		}
		path, ok := strings.CutPrefix(ev.Request.URL, b.base)
		if !ok {
			return
		}
		accept, _ := ev.Request.Headers["Accept"].(string)
		b.exchanges = append(b.exchanges, &exchange{id: ev.RequestID, method: ev.Request.Method,
			path: path, kind: ev.Type, accept: accept})
	case *network.EventResponseReceived:
		if x := b.last(ev.RequestID); x != nil {
			x.status = ev.Response.Status
		}
	case *cdplog.EventEntryAdded:
		if strings.Contains(ev.Entry.Text, "Content Security Policy") {
			b.refused = append(b.refused, ev.Entry.Text)
		}
	}
}

// violations returns what the Content-Security-Policy blocked so far.
func (b *tab) violations() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.refused...)
}

func (b *tab) last(id network.RequestID) *exchange {
	for i := len(b.exchanges) - 1; i >= 0; i-- {
		if b.exchanges[i].id == id {
			return b.exchanges[i]
		}
	}
	return nil
}

// posts returns copies of the POST exchanges to path, in order.
func (b *tab) posts(path string) []exchange {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []exchange
	for _, x := range b.exchanges {
		if x.method == "POST" && x.path == path {
			out = append(out, *x)
		}
	}
	return out
}

// do runs actions with a deadline and fails the test, saying where the tab
// was, when they do not succeed in time.
func (b *tab) do(what string, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\n%s", what, err, b.where())
	}
}

// get runs one action that answers a value, with a deadline.
func get[T any](b *tab, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.t.Fatalf("%s: %v\n%s", what, err, b.where())
	}
	return v
}

// where describes the page the tab shows, for failure messages.
func (b *tab) where() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if len(text) > 600 {
		text = text[:600] + "…"
	}
	return fmt.Sprintf("the tab shows %s:\n%s", loc, text)
}

// loaded waits until the page shown has run its deferred script and fired
// its load event. Before that a click submits natively (right for a user,
// but not the path a scripted test means to drive), and Chromium sends the
// DOM again at DOMContentLoaded, which voids the node ids of earlier
// queries. Call it once something only the new page has is visible. It
// waits for the load event rather than polling in the page, because a tab
// with scripts off runs no page timers, and so no chromedp.Poll beyond the
// first check.
func loaded() chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		loads := chromedp.Events(ctx, page.LoadEventFired) // before the check: no load is missed
		state, err := chromedp.Evaluate[string](`document.readyState`)(ctx, t)
		if err != nil || state == "complete" {
			return chromedp.Void{}, err
		}
		for _, err := range loads {
			return chromedp.Void{}, err
		}
		return chromedp.Void{}, ctx.Err()
	}
}

// signIn signs in through the real form and lands on the inbox.
func (b *tab) signIn(name string) {
	b.t.Helper()
	b.do("sign in as "+name, stepTimeout,
		chromedp.Navigate(b.base+"/login"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), name),
		chromedp.SendKeys(chromedp.CSS("#password"), testPassword),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="user-name"]`)),
		loaded(),
	)
	if got := get(b, "read the signed-in user", chromedp.Text(chromedp.CSS(`[data-testid="user-name"]`))); got != name {
		b.t.Fatalf("signed in as %q, want %q", got, name)
	}
	b.wantAt("/inbox")
}

// landOnInbox waits until the inbox is loaded again, without the decided
// run and with a flash message, and returns the flash.
func (b *tab) landOnInbox(runSel string, d time.Duration) string {
	b.t.Helper()
	b.do("land on the inbox with a flash", d,
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(runSel)),
		loaded(),
	)
	b.wantAt("/inbox")
	return strings.TrimSpace(get(b, "read the flash", chromedp.Text(chromedp.CSS(`[data-testid="flash"]`))))
}

func (b *tab) wantAt(path string) {
	b.t.Helper()
	if got := get(b, "read the location", chromedp.Location()); got != b.base+path {
		b.t.Fatalf("the tab is at %s, want %s", got, b.base+path)
	}
}

// runSelector finds a run's article in the inbox.
func runSelector(id int64) string {
	return fmt.Sprintf(`article[data-testid="inbox-run"][data-run-id="%d"]`, id)
}

// doubleClick is a real double click: two press-release pairs at one
// point, the second with a click count of 2, back to back. (DoubleClick of
// chromedp sends one pair with a count of 2, which a page sees as a single
// click.)
func doubleClick(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.QueryAfter(chromedp.CSS(sel), func(ctx context.Context, t *chromedp.Target, nodes []*chromedp.Node) (chromedp.Void, error) {
		id := nodes[0].NodeID
		if _, err := cdp.Call(ctx, t, dom.ScrollIntoViewIfNeeded, dom.ScrollIntoViewIfNeededParams{NodeID: id}); err != nil {
			return chromedp.Void{}, err
		}
		res, err := cdp.Call(ctx, t, dom.GetContentQuads, dom.GetContentQuadsParams{NodeID: id})
		if err != nil {
			return chromedp.Void{}, err
		}
		if len(res.Quads) == 0 || len(res.Quads[0]) != 8 {
			return chromedp.Void{}, fmt.Errorf("%s has no box to click", sel)
		}
		q := res.Quads[0]
		x, y := (q[0]+q[2]+q[4]+q[6])/4, (q[1]+q[3]+q[5]+q[7])/4
		for count := 1; count <= 2; count++ {
			for _, typ := range []input.DispatchMouseEventType{chromedp.MousePressed, chromedp.MouseReleased} {
				if _, err := chromedp.MouseEvent(typ, x, y, chromedp.ButtonType(input.MouseButtonLeft), chromedp.ClickCount(count))(ctx, t); err != nil {
					return chromedp.Void{}, err
				}
			}
		}
		return chromedp.Void{}, nil
	}, chromedp.NodeVisible)
}

// wantSettled checks the database after one decision that finished a run:
// the run completed, exactly one decision row and, for an order, exactly
// one refund.
func wantSettled(t *testing.T, a *testApp, runID int64, order string) {
	t.Helper()
	if got := a.Run(t, runID).Status; got != runtime.StatusCompleted {
		t.Errorf("run status = %s, want %s", got, runtime.StatusCompleted)
	}
	if n := len(a.Decisions(t, runID)); n != 1 {
		t.Errorf("decisions for the run = %d, want 1", n)
	}
	if order != "" {
		if n := a.Refunds(t, order); n != 1 {
			t.Errorf("refunds of %s = %d, want 1", order, n)
		}
	}
}

// progressSeen is what the page showed in the step counter while the
// continuation ran.
type progressSeen struct {
	Values []string `json:"values"`
	Text   string   `json:"text"`
	Busy   bool     `json:"busy"`
}

// watchProgress notes every data-steps value of a counter on each DOM
// mutation, and answers once it moved through two values above 0 (the 0
// is the script's own, before the first line arrives).
const watchProgress = `(sel) => {
	const seen = window.__turnstileSteps || (window.__turnstileSteps = []);
	const el = document.querySelector(sel + ' [data-testid="progress"]');
	const v = el ? el.getAttribute('data-steps') : null;
	if (v !== null && seen[seen.length - 1] !== v) seen.push(v);
	if (new Set(seen.filter((s) => s !== '0')).size < 2) return false;
	const form = document.querySelector(sel + ' form');
	return {values: seen, text: el.textContent, busy: !!form && form.getAttribute('aria-busy') === 'true'};
}`

// TestBrowserStreamedApproveShowsProgress: with JavaScript, Approve streams
// the continuation, the step counter moves while it runs, and the inbox
// comes back with the outcome.
func TestBrowserStreamedApproveShowsProgress(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "slow")
	b := openTab(t, a, true)
	b.signIn("approver")
	sel := runSelector(paused.RunID)

	start := time.Now()
	b.do("click Approve", stepTimeout, chromedp.Click(chromedp.CSS(sel+` button[name="decision"][value="approve"]`)))
	seen := get(b, "watch the step counter move", chromedp.PollFunction[progressSeen](watchProgress,
		chromedp.WithPollingMutation(), chromedp.WithPollingArgs(sel), chromedp.WithPollingTimeout(stepTimeout)))
	prev := -1
	for _, v := range seen.Values {
		n, err := strconv.Atoi(v)
		if err != nil || n < prev {
			t.Errorf("data-steps went %v, want a count that only grows", seen.Values)
			break
		}
		prev = n
	}
	if !strings.Contains(seen.Text, "step") {
		t.Errorf("progress text = %q, want a step count", seen.Text)
	}
	if !seen.Busy {
		t.Errorf("the form is not aria-busy while the run continues")
	}

	flash := b.landOnInbox(sel, settleTimeout)
	t.Logf("counter showed %v; approve to inbox took %s", seen.Values, time.Since(start).Round(time.Millisecond))
	if want := fmt.Sprintf("You %s; run %d completed: the agent finished.", "approved refund_order", paused.RunID); flash != want {
		t.Errorf("flash = %q, want %q", flash, want)
	}
	posts := b.posts(fmt.Sprintf("/inbox/runs/%d/decision", paused.RunID))
	if len(posts) != 1 || posts[0].kind != network.ResourceTypeFetch || !strings.Contains(posts[0].accept, "application/x-ndjson") || posts[0].status != 200 {
		t.Errorf("decision requests = %+v, want one streamed fetch answered 200", posts)
	}
	wantSettled(t, a, paused.RunID, order)
}

// TestBrowserDoubleClickApprovesOnce: a double click on Approve continues
// the run once.
func TestBrowserDoubleClickApprovesOnce(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "slow")
	b := openTab(t, a, true)
	b.signIn("approver")
	sel := runSelector(paused.RunID)

	b.do("double-click Approve", stepTimeout, doubleClick(sel+` button[name="decision"][value="approve"]`))
	flash := b.landOnInbox(sel, settleTimeout)

	// The database decides: one decision, one refund, one settled run.
	wantSettled(t, a, paused.RunID, order)
	// A second request would follow the first one's continuation, and its
	// flash (who approved) would then be the last one shown; that is
	// harmless, though inbox.js
	// means to send nothing more once the form is busy.
	if want := fmt.Sprintf("You %s; run %d completed: the agent finished.", "approved refund_order", paused.RunID); flash != want {
		if !strings.Contains(flash, "was approved by") {
			t.Errorf("flash = %q, want %q", flash, want)
		}
		t.Logf("flash = %q: a second decision request reached the server", flash)
	}
	posts := b.posts(fmt.Sprintf("/inbox/runs/%d/decision", paused.RunID))
	if len(posts) != 1 {
		t.Errorf("%d decision requests after a double click, want 1 (the script disables the form): %+v", len(posts), posts)
	}
	if len(posts) > 0 && posts[0].kind != network.ResourceTypeFetch {
		t.Errorf("the decision went as %s, want the script's fetch", posts[0].kind)
	}
}

// TestBrowserNativeApproveRedirectsWithFlash: without JavaScript, Approve is
// a plain POST answered 303 to the inbox, which shows the outcome.
func TestBrowserNativeApproveRedirectsWithFlash(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "refund")
	b := openTab(t, a, false)
	b.signIn("approver")
	sel := runSelector(paused.RunID)

	b.do("click Approve", stepTimeout, chromedp.Click(chromedp.CSS(sel+` button[name="decision"][value="approve"]`)))
	flash := b.landOnInbox(sel, settleTimeout)
	if want := fmt.Sprintf("You %s; run %d completed: the agent finished.", "approved refund_order", paused.RunID); flash != want {
		t.Errorf("flash = %q, want %q", flash, want)
	}
	posts := b.posts(fmt.Sprintf("/inbox/runs/%d/decision", paused.RunID))
	if len(posts) != 1 || posts[0].kind != network.ResourceTypeDocument || posts[0].status != 303 {
		t.Errorf("decision requests = %+v, want one native form POST answered 303", posts)
	}
	wantSettled(t, a, paused.RunID, order)
}

// submitInvalidAmount types an amount below the schema's minimum and a
// note into an input run's form and submits it, past Chromium's own
// validation: the amount field carries min="1", and the browser would
// otherwise refuse to send the form at all. The server's 422 exists for
// the submissions that get past a browser (an old one, one without
// constraint validation, a hand-made request); novalidate makes this
// browser one of them. DOM.setAttributeValue works with scripts off.
func submitInvalidAmount(b *tab, sel string) {
	b.t.Helper()
	b.do("submit an amount of 0", stepTimeout,
		chromedp.SendKeys(chromedp.CSS(sel+` input[name="amount"]`), "0"),
		chromedp.SendKeys(chromedp.CSS(sel+` input[name="note"]`), "keep-me"),
		chromedp.SetAttributeValue(chromedp.CSS(sel+` form`), "novalidate", ""),
		chromedp.Click(chromedp.CSS(sel+` form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(sel+` [data-testid="field-error"]`)),
		loaded(),
	)
}

// wantKeptValues checks the 422 page: the field error on the amount and
// both values as the user typed them.
func wantKeptValues(t *testing.T, b *tab, sel string, runID int64) {
	t.Helper()
	b.wantAt(fmt.Sprintf("/inbox/runs/%d/input", runID))
	if got := get(b, "read the field error's field", chromedp.AttributeValue(chromedp.CSS(sel+` [data-testid="field-error"]`), "data-field")); got.Value != "amount" {
		t.Errorf("field error is on %q, want amount", got.Value)
	}
	if got := get(b, "read the amount", chromedp.Value(chromedp.CSS(sel+` input[name="amount"]`))); got != "0" {
		t.Errorf("amount = %q, want the 0 typed", got)
	}
	if got := get(b, "read the note", chromedp.Value(chromedp.CSS(sel+` input[name="note"]`))); got != "keep-me" {
		t.Errorf("note = %q, want keep-me", got)
	}
}

// submitValidAmount corrects the amount on the 422 page and submits.
func submitValidAmount(b *tab, sel string) {
	b.t.Helper()
	b.do("submit an amount of 250", stepTimeout,
		chromedp.Clear(chromedp.CSS(sel+` input[name="amount"]`)),
		chromedp.SendKeys(chromedp.CSS(sel+` input[name="amount"]`), "250"),
		chromedp.Click(chromedp.CSS(sel+` form button[type="submit"]`)),
	)
}

// wantAnswer checks the one decision recorded for an input run.
func wantAnswer(t *testing.T, a *testApp, runID int64) {
	t.Helper()
	wantSettled(t, a, runID, "")
	var raw string
	if err := a.DB.GetContext(context.Background(), &raw, `SELECT input FROM decisions WHERE run_id = ?`, runID); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Amount int    `json:"amount"`
		Note   string `json:"note"`
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil || got.Amount != 250 || got.Note != "keep-me" {
		t.Errorf("recorded answer = %s (%v), want amount 250 and note keep-me", raw, err)
	}
}

// TestBrowserNativeInvalidInputKeepsValues: without JavaScript, a refused
// answer comes back as a 422 inbox with the field error and the values
// typed; the corrected answer finishes the run.
func TestBrowserNativeInvalidInputKeepsValues(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "input")
	b := openTab(t, a, false)
	b.signIn("approver")
	sel := runSelector(paused.RunID)
	path := fmt.Sprintf("/inbox/runs/%d/input", paused.RunID)

	submitInvalidAmount(b, sel)
	wantKeptValues(t, b, sel, paused.RunID)
	if posts := b.posts(path); len(posts) != 1 || posts[0].kind != network.ResourceTypeDocument || posts[0].status != 422 {
		t.Errorf("input requests = %+v, want one native form POST answered 422", posts)
	}
	if got := a.Run(t, paused.RunID).Status; got != runtime.StatusWaitingForInput {
		t.Errorf("after the 422 the run is %s, want still %s", got, runtime.StatusWaitingForInput)
	}
	if n := len(a.Decisions(t, paused.RunID)); n != 0 {
		t.Errorf("after the 422 decisions = %d, want 0", n)
	}

	submitValidAmount(b, sel)
	flash := b.landOnInbox(sel, settleTimeout)
	if want := fmt.Sprintf("You %s; run %d completed: the agent finished.", "answered ask_operator", paused.RunID); flash != want {
		t.Errorf("flash = %q, want %q", flash, want)
	}
	if posts := b.posts(path); len(posts) != 2 || posts[1].kind != network.ResourceTypeDocument || posts[1].status != 303 {
		t.Errorf("input requests = %+v, want the second a native form POST answered 303", posts)
	}
	wantAnswer(t, a, paused.RunID)
}

// TestBrowserScriptedInvalidInputFallsBackToTheServerPage: with
// JavaScript, the script meets the 422 and submits the form natively, so the
// browser shows the server's own 422 page with the values kept.
func TestBrowserScriptedInvalidInputFallsBackToTheServerPage(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "input")
	b := openTab(t, a, true)
	b.signIn("approver")
	sel := runSelector(paused.RunID)
	path := fmt.Sprintf("/inbox/runs/%d/input", paused.RunID)

	submitInvalidAmount(b, sel)
	wantKeptValues(t, b, sel, paused.RunID)
	// The script's fetch got the 422, and it submitted the same form
	// natively so that the server's own page shows.
	posts := b.posts(path)
	if len(posts) != 2 ||
		posts[0].kind != network.ResourceTypeFetch || !strings.Contains(posts[0].accept, "application/x-ndjson") || posts[0].status != 422 ||
		posts[1].kind != network.ResourceTypeDocument || posts[1].status != 422 {
		t.Errorf("input requests = %+v, want a streamed fetch answered 422, then a native form POST answered 422", posts)
	}
	if n := len(a.Decisions(t, paused.RunID)); n != 0 {
		t.Errorf("after the 422 decisions = %d, want 0", n)
	}

	submitValidAmount(b, sel)
	flash := b.landOnInbox(sel, settleTimeout)
	if want := fmt.Sprintf("You %s; run %d completed: the agent finished.", "answered ask_operator", paused.RunID); flash != want {
		t.Errorf("flash = %q, want %q", flash, want)
	}
	if posts := b.posts(path); len(posts) != 3 || posts[2].kind != network.ResourceTypeFetch || posts[2].status != 200 {
		t.Errorf("input requests = %+v, want the third a streamed fetch answered 200", posts)
	}
	wantAnswer(t, a, paused.RunID)
}
