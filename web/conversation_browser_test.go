package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestBrowserFollowUp sends "now refund ORD-1002 too" from the run page,
// with the page's script (one streamed fetch, the page loaded again with
// turn 2) and without it (a native post, back on the run page with a
// flash): either way the run waits in turn 2 for the follow-up's refund.
func TestBrowserFollowUp(t *testing.T) {
	for _, js := range []bool{true, false} {
		t.Run(fmt.Sprintf("js=%v", js), func(t *testing.T) {
			a := newApp(t, 0)
			id := a.settledRun(t, "owner")
			b := openTab(t, a, js)
			b.signIn("owner")
			path := runPath(id, "")
			b.do("open the run page", stepTimeout,
				chromedp.Navigate(b.base+path),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="followup-content"]`)),
				loaded(),
				chromedp.SendKeys(chromedp.CSS(`[data-testid="followup-content"]`), "now refund ORD-1002 too"),
				chromedp.Click(chromedp.CSS(`[data-testid="followup-send"]`)),
			)
			b.do("see turn 2 on the run page", settleTimeout,
				chromedp.WaitVisible(chromedp.CSS(`[data-testid="step-turn"][data-turn="2"]`)),
				loaded(),
			)
			b.wantAt(path)
			r := a.Run(t, id)
			if r.ConversationTurn != 2 || r.Status != runtime.StatusWaitingForApproval {
				t.Fatalf("run = %s at turn %d, want turn 2 waiting", r.Status, r.ConversationTurn)
			}
			turn, err := a.Engine.Turn(context.Background(), id)
			if err != nil || len(turn.Calls) != 1 || !strings.Contains(string(turn.Calls[0].Arguments), "ORD-1002") {
				t.Errorf("turn 2 asks %+v (%v), want the refund of ORD-1002", turn, err)
			}
			posts := b.posts(runPath(id, "/messages"))
			if len(posts) != 1 {
				t.Fatalf("follow-up posts = %+v, want one", posts)
			}
			streamed := posts[0].kind == network.ResourceTypeFetch && strings.Contains(posts[0].accept, "application/x-ndjson")
			if streamed != js {
				t.Errorf("the follow-up was posted as %+v; want a streamed fetch exactly when scripts run", posts[0])
			}
		})
	}
}
