package web_test

// Browser tests of the Cancel buttons: the run page's and the
// playground's, with JavaScript (fetch, answered in place) and without
// (a plain POST, answered by the run page with a flash). The runs sit in
// a 60-second tool call when the button is pressed: the cancel must stop
// the call, not wait for its end. Every wait is on a condition with a
// deadline.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
)

// sleepyYAML runs a 60-second read-only tool call at once, then answers.
const sleepyYAML = `
identifier: sleepy
name: Sleepy
provider:
  type: scripted
  script:
    rounds:
      - text: "Working on it."
        tool_calls: [{name: slow_task, arguments: {seconds: 60, label: "a long job"}}]
      - text: "never reached"
tools: [slow_task]
`

// sleeping starts a sleepy run owned by owner in the app's engine, which
// holds it inside its tool call until the returned channel says how it
// ended.
func sleeping(t *testing.T, a *testApp) (int64, <-chan runtime.Outcome) {
	t.Helper()
	c, err := a.Engine.Start(context.Background(), runtime.StartRequest{Configuration: "sleepy", Prompt: "go",
		Owner: a.Users["owner"].Actor(), Origin: runtime.OriginInteractive})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan runtime.Outcome, 1)
	go func() { done <- c.Run(context.Background(), nil) }()
	return c.RunID(), done
}

// wantCancelledSoon fails the test unless the run's continuation ended
// cancelled within a few seconds, long before its tool call would have.
func wantCancelledSoon(t *testing.T, a *testApp, id int64, done <-chan runtime.Outcome) {
	t.Helper()
	select {
	case out := <-done:
		if out.Status != runtime.StatusCancelled {
			t.Errorf("the continuation ended %s, want cancelled", out.Status)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("run %d still runs 5 s after its Cancel button was pressed", id)
	}
	if r := a.Run(t, id); r.Status != runtime.StatusCancelled {
		t.Errorf("run %d is %s, want cancelled", id, r.Status)
	}
}

// TestBrowserRunPageCancelStopsTheCall: the run page's Cancel button
// stops a run inside its tool call; with a script the page says so in
// place (no navigation) and shows the status, without one the run page
// comes back with the flash.
func TestBrowserRunPageCancelStopsTheCall(t *testing.T) {
	eachJS(t, func(t *testing.T, js bool) {
		a := newAppWith(t, 0, appEngine{configs: []string{sleepyYAML}})
		id, done := sleeping(t, a)
		b := openTab(t, a, js)
		b.signIn("owner")
		b.do("open the run's page", stepTimeout,
			chromedp.Navigate(b.base+runPath(id, "")),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="cancel-button"]`)),
			loaded(),
		)
		b.do("press Cancel", stepTimeout, chromedp.Click(chromedp.CSS(`[data-testid="cancel-button"]`)))
		want := fmt.Sprintf("Run %d was cancelled.", id)
		if js {
			b.do("see the answer in place", stepTimeout, chromedp.WaitVisible(chromedp.CSS(`[data-testid="cancel-result"]`)))
			if got := text(b, `[data-testid="cancel-result"]`); got != want {
				t.Errorf("the page says %q, want %q", got, want)
			}
			if got := shown(b, `[data-testid="cancel-form"]`); got != "absent" {
				t.Errorf("after the cancel the form is %s, want absent", got)
			}
			if posts := b.posts(runPath(id, "/cancel")); len(posts) != 1 || !strings.Contains(posts[0].accept, "application/json") {
				t.Errorf("cancel posts = %+v, want one fetch asking for JSON", posts)
			}
		} else {
			b.do("land on the run page with a flash", stepTimeout,
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
				loaded(),
			)
			b.wantAt(runPath(id, ""))
			if got := text(b, `[data-testid="flash"]`); got != want {
				t.Errorf("flash = %q, want %q", got, want)
			}
		}
		if got := text(b, `[data-testid="run-status"]`); got != "cancelled" {
			t.Errorf("the page shows the run %q, want cancelled", got)
		}
		wantCancelledSoon(t, a, id, done)
	})
}

// TestBrowserPlaygroundCancelStopsTheStreamedRun: with a script, the
// playground offers Cancel while the run streams; pressing it inside the
// tool call ends the stream with its "cancelled" outcome.
func TestBrowserPlaygroundCancelStopsTheStreamedRun(t *testing.T) {
	a := newAppWith(t, 0, appEngine{configs: []string{sleepyYAML}})
	b := openTab(t, a, true)
	b.signIn("admin")
	b.do("start a sleepy run", stepTimeout,
		chromedp.Navigate(b.base+"/playground"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="playground-form"]`)),
		loaded(),
		chromedp.SetValue(chromedp.CSS(`#playground-configuration`), "sleepy"),
		chromedp.SendKeys(chromedp.CSS(`#playground-prompt`), "go"),
		chromedp.Click(chromedp.CSS(`[data-testid="playground-form"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="playground-outcome-area"] [data-testid="cancel-button"]`)),
	)
	var id int64
	b.waitFor("the run to be inside its tool call", stepTimeout, func() bool {
		return a.Count(t, `SELECT COUNT(*) FROM runs r JOIN run_events e ON e.run_id = r.id
			WHERE r.status = 'running' AND e.kind = 'llm'`) == 1
	})
	if err := a.DB.Get(&id, `SELECT id FROM runs WHERE status = 'running'`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b.do("press Cancel and see the stream end", stepTimeout,
		chromedp.Click(chromedp.CSS(`[data-testid="playground-outcome-area"] [data-testid="cancel-button"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="playground-outcome"][data-event="cancelled"]`)),
	)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the stream ended %s after the click", took)
	}
	if r := a.Run(t, id); r.Status != runtime.StatusCancelled {
		t.Errorf("run %d is %s, want cancelled", id, r.Status)
	}
	if got := shown(b, `[data-testid="cancel-button"]`); got != "absent" {
		t.Errorf("after the cancelled line the Cancel button is %s, want absent", got)
	}
}

// TestBrowserPlaygroundCancelWithoutScript: without a script the
// playground answers once the run paused, with a Cancel form beside the
// decision; it posts natively and lands on the run page, cancelled.
func TestBrowserPlaygroundCancelWithoutScript(t *testing.T) {
	a := newApp(t, 0)
	b := openTab(t, a, false)
	b.signIn("admin")
	b.do("start a refund, which pauses", stepTimeout,
		chromedp.Navigate(b.base+"/playground"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="playground-form"]`)),
		loaded(),
		chromedp.SetValue(chromedp.CSS(`#playground-configuration`), "refund"),
		chromedp.SendKeys(chromedp.CSS(`#playground-prompt`), "Refund "+a.Order(t)),
		chromedp.Click(chromedp.CSS(`[data-testid="playground-form"] button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="playground-outcome"][data-event="awaiting_approval"] [data-testid="cancel-button"]`)),
		loaded(),
	)
	var id int64
	if err := a.DB.Get(&id, `SELECT id FROM runs WHERE status = 'waiting_for_approval'`); err != nil {
		t.Fatal(err)
	}
	b.do("press Cancel", stepTimeout,
		chromedp.Click(chromedp.CSS(`[data-testid="cancel-button"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
		loaded(),
	)
	b.wantAt(runPath(id, ""))
	if got, want := text(b, `[data-testid="flash"]`), fmt.Sprintf("Run %d was cancelled.", id); got != want {
		t.Errorf("flash = %q, want %q", got, want)
	}
	if r := a.Run(t, id); r.Status != runtime.StatusCancelled {
		t.Errorf("run %d is %s, want cancelled", id, r.Status)
	}
}
