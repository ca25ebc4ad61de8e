package web_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestBrowserDecidesCallByCall: on a card of two calls, the approver
// approves the lookup and denies the refund with a reason of its own, with
// scripts (the form streams) and without (a native POST); either way the
// refund does not run and the model reads its denial.
func TestBrowserDecidesCallByCall(t *testing.T) {
	for _, js := range []bool{true, false} {
		t.Run(map[bool]string{true: "scripted", false: "native"}[js], func(t *testing.T) {
			a := newApp(t, 0)
			paused, order := a.Waiting(t, "percall")
			lookup, refund := twoCalls(t, paused)
			b := openTab(t, a, js)
			b.signIn("approver")
			sel := runSelector(paused.RunID)
			radio := func(id, decision string) string {
				return fmt.Sprintf(`%s input[name="calls.%s.decision"][value="%s"]`, sel, id, decision)
			}
			b.do("choose per call", stepTimeout,
				chromedp.Click(chromedp.CSS(radio(lookup, "approve"))),
				chromedp.Click(chromedp.CSS(radio(refund, "deny"))),
				chromedp.SendKeys(chromedp.CSS(fmt.Sprintf(`%s textarea[name="calls.%s.reason"]`, sel, refund)), "not eligible"),
				chromedp.Click(chromedp.CSS(sel+` button[name="decision"][value="calls"]`)))
			flash := b.landOnInbox(sel, settleTimeout)
			if want := fmt.Sprintf("You decided lookup_order and refund_order call by call; run %d completed: the agent finished.", paused.RunID); flash != want {
				t.Errorf("flash = %q, want %q", flash, want)
			}
			posts := b.posts(fmt.Sprintf("/inbox/runs/%d/decision", paused.RunID))
			wantKind, wantStatus := network.ResourceTypeDocument, int64(303)
			if js {
				wantKind, wantStatus = network.ResourceTypeFetch, 200
			}
			if len(posts) != 1 || posts[0].kind != wantKind || posts[0].status != wantStatus {
				t.Errorf("decision requests = %+v, want one %s answered %d", posts, wantKind, wantStatus)
			}
			a.wantLookupRanRefundDenied(t, paused, order, "denied by approver: not eligible")
		})
	}
}
