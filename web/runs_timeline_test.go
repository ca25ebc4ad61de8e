package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"golang.org/x/net/html"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// A ten-round run with every kind of step, at the full privacy level; and
// a run whose provider fails in its second round (the script has one).
func init() {
	lookup := `      - tool_calls: [{name: lookup_order, arguments: {order_id: "${order_id}"}}]
`
	testConfigs = append(testConfigs, `
identifier: timeline
name: Timeline
privacy_level: full
max_iterations: 12
provider:
  type: scripted
  script:
    rounds:
      - text: "TL-TEXT I look the order up first."
        tool_calls: [{name: lookup_order, arguments: {order_id: "${order_id}"}}]
`+lookup+`      - tool_calls: [{name: lookup_order, arguments: {order_id: "TL-NO-SUCH-ORDER"}}]
      - text: "TL-REFUND refunding now"
        tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}", reason: "TL-ARG"}}]
      - tool_calls: [{name: ask_operator, arguments: {question: "Anything else?"}}]
`+strings.Repeat(lookup, 4)+`      - text: "TL-ANSWER refunded, and nothing else to do."
tools: [lookup_order, refund_order, ask_operator]
`, `
identifier: broken
name: Broken
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: lookup_order, arguments: {order_id: "${order_id}"}}]
tools: [lookup_order]
`)
}

// tenRounds runs the timeline configuration to its end: an approval with
// a reason in round 4, an answer in round 5, ten model rounds in all.
func tenRounds(t *testing.T, a *testApp) int64 {
	t.Helper()
	paused, _ := a.Waiting(t, "timeline")
	asked := a.Decide(t, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Scope: runtime.ScopeOnce, Reason: "TL-REASON the customer called"})
	if asked.Status != runtime.StatusWaitingForInput {
		t.Fatalf("run %d after the approval: %s, want waiting for input", asked.RunID, asked.Status)
	}
	c, err := a.Engine.SubmitInput(context.Background(), runtime.InputRequest{RunID: asked.RunID, Digest: asked.Digest,
		Input: json.RawMessage(`{"amount": 250, "note": "fine"}`), Actor: a.Actor("approver")})
	if err != nil {
		t.Fatalf("answer run %d: %v", asked.RunID, err)
	}
	if out := c.Run(context.Background(), nil); out.Status != runtime.StatusCompleted || out.Iterations != 10 {
		t.Fatalf("run %d: %s after %d rounds, want completed after 10", out.RunID, out.Status, out.Iterations)
	}
	return paused.RunID
}

// parsePage parses an HTML page.
func parsePage(t *testing.T, body string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// nodes are the elements below n with an attribute of a value ("" for any
// value), optionally of a tag.
func nodes(n *html.Node, tag, key, value string) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type != html.ElementNode || (tag != "" && d.Data != tag) {
			continue
		}
		if key == "" {
			out = append(out, d)
			continue
		}
		if v, ok := attrOf(d, key); ok && (value == "" || v == value) {
			out = append(out, d)
		}
	}
	return out
}

// node is the one element nodes finds; none or several fail the test.
func node(t *testing.T, n *html.Node, tag, key, value string) *html.Node {
	t.Helper()
	got := nodes(n, tag, key, value)
	if len(got) != 1 {
		t.Fatalf("<%s %s=%q>: %d found, want 1 in %q", tag, key, value, len(got), textOf(n))
	}
	return got[0]
}

func attrOf(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func textOf(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data + " ")
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func folded(n *html.Node) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type == html.ElementNode && p.Data == "details" {
			_, open := attrOf(p, "open")
			return !open
		}
	}
	return false
}

// TestRunPageTimeline: the page of a ten-round run shows every step by its
// kind: what the model said and called, each tool's result folded (an
// error marked), who approved what and why, who answered, how it ended;
// and no JSON outside the toggles.
func TestRunPageTimeline(t *testing.T) {
	a := newApp(t, 0)
	id := tenRounds(t, a)
	res, body := a.as(t, "owner").get(runPath(id, ""))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", runPath(id, ""), res.StatusCode)
	}
	doc := parsePage(t, body)
	events := nodes(doc, "li", "data-testid", "event")
	kinds := map[string][]*html.Node{}
	for _, e := range events {
		k, _ := attrOf(e, "data-kind")
		kinds[k] = append(kinds[k], e)
	}
	// The answer to ask_operator is the input step itself: no tool step.
	want := map[string]int{"llm": 10, "tool": 8, "suspend": 2, "approval": 1, "input": 1, "settle": 1}
	for k, n := range want {
		if len(kinds[k]) != n {
			t.Errorf("%s events: %d, want %d", k, len(kinds[k]), n)
		}
	}
	if len(events) != 23 {
		t.Errorf("events: %d, want 23", len(events))
	}

	first := kinds["llm"][0]
	if got := textOf(node(t, first, "", "data-testid", "step-text")); got != "TL-TEXT I look the order up first." {
		t.Errorf("round 1 says %q", got)
	}
	call := node(t, first, "details", "data-testid", "step-call")
	if got := textOf(node(t, call, "code", "class", "tool")); got != "lookup_order" {
		t.Errorf("round 1 calls %q", got)
	}
	if args := node(t, call, "pre", "data-testid", "step-arguments"); !folded(args) || !strings.Contains(textOf(args), `"order_id": "W-`) {
		t.Errorf("round 1's arguments %q are not folded JSON", textOf(args))
	}

	var errors int
	for _, e := range kinds["tool"] {
		r := node(t, e, "details", "data-testid", "step-result")
		if _, open := attrOf(r, "open"); open {
			t.Errorf("a tool's result is unfolded: %q", textOf(r))
		}
		if len(nodes(e, "", "data-testid", "step-error")) == 1 {
			errors++
			if tool := textOf(node(t, e, "", "data-testid", "step-tool")); tool != "lookup_order" {
				t.Errorf("the failed call is of %q, want lookup_order", tool)
			}
			if !strings.Contains(textOf(r), "order TL-NO-SUCH-ORDER not found") {
				t.Errorf("the failed call's result: %q", textOf(r))
			}
		}
	}
	if errors != 1 {
		t.Errorf("tool steps marked as errors: %d, want 1", errors)
	}

	approval := kinds["approval"][0]
	if d := nodes(approval, "span", "class", "duration"); len(d) != 0 {
		t.Errorf("the approval shows a duration %q; only timed steps do", textOf(d[0]))
	}
	if d := textOf(node(t, kinds["tool"][0], "span", "class", "duration")); !strings.HasSuffix(d, " ms") {
		t.Errorf("a tool step's duration reads %q", d)
	}
	if got, want := textOf(node(t, approval, "p", "data-testid", "step-decision")), "approver approved 1 call only this time"; got != want {
		t.Errorf("approval: %q, want %q", got, want)
	}
	if got := textOf(node(t, approval, "", "data-testid", "step-reason")); got != "TL-REASON the customer called" {
		t.Errorf("approval reason: %q", got)
	}
	if got := textOf(node(t, kinds["input"][0], "p", "data-testid", "step-decision")); got != "approver answered" {
		t.Errorf("input: %q", got)
	}
	if got := textOf(node(t, kinds["suspend"][0], "", "data-testid", "step-pause")); got != "Waits for approval of refund_order" {
		t.Errorf("first pause: %q", got)
	}
	settle := kinds["settle"][0]
	if got := textOf(node(t, settle, "", "data-testid", "step-settle")); got != "completed the agent finished" {
		t.Errorf("settle: %q", got)
	}
	if got := textOf(node(t, settle, "", "data-testid", "step-answer")); got != "TL-ANSWER refunded, and nothing else to do." {
		t.Errorf("answer: %q", got)
	}

	// Compact: every JSON block and every result sits in a closed toggle,
	// one per event for its JSON.
	timeline := node(t, doc, "ol", "data-testid", "timeline")
	for _, pre := range nodes(timeline, "pre", "", "") {
		if !folded(pre) {
			t.Errorf("a <pre> outside a closed toggle: %.80q", textOf(pre))
		}
	}
	if raw := nodes(timeline, "pre", "data-testid", "event-raw"); len(raw) != len(events) {
		t.Errorf("JSON toggles: %d, want one per event (%d)", len(raw), len(events))
	}
	if strings.Contains(body, " style=") || strings.Contains(body, "<script>") {
		t.Error("the page has an inline style or script, which the Content-Security-Policy forbids")
	}
	if len(nodes(doc, "", "data-testid", "run-failure")) != 0 {
		t.Error("a completed run shows a failure")
	}
}

// TestRunPageTimelineMetadata: at the default privacy level the page says
// how much content there was and that it was not stored, and shows none.
func TestRunPageTimelineMetadata(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "refund")
	a.Approve(t, paused)
	_, body := a.as(t, "owner").get(runPath(paused.RunID, ""))
	for _, marker := range []string{"MARKER-TEXT", "MARKER-ARG", "MARKER-CUSTOMER"} {
		if strings.Contains(body, marker) {
			t.Errorf("the page shows %s, content the metadata level does not store", marker)
		}
	}
	doc := parsePage(t, body)
	first := node(t, doc, "li", "data-seq", "1")
	text := textOf(node(t, first, "", "data-testid", "step-text"))
	if want := fmt.Sprintf("text: %d bytes (not stored at this privacy level)", len("MARKER-TEXT looking up")); text != want {
		t.Errorf("round 1: %q, want %q", text, want)
	}
	if got := textOf(node(t, first, "span", "data-testid", "step-call")); !strings.HasPrefix(got, "calls lookup_order arguments: ") ||
		!strings.HasSuffix(got, " bytes (not stored at this privacy level)") {
		t.Errorf("round 1's call: %q", got)
	}
}

// TestFailedRunSaysWhy: a run whose provider failed says so at the top of
// its page, in words and with the cause it recorded; the playground's
// result without JavaScript does too.
func TestFailedRunSaysWhy(t *testing.T) {
	a := newApp(t, 0)
	out, _ := a.Start(t, testrig.Launch{Configuration: "broken"})
	if out.Status != runtime.StatusFailed || out.Reason != runtime.ReasonProviderFailed {
		t.Fatalf("run %d: %s (%s), want failed (provider_failed)", out.RunID, out.Status, out.Reason)
	}
	const detail = "provider failed: scripted: round 2: the script has only 1 round"
	_, body := a.as(t, "owner").get(runPath(out.RunID, ""))
	doc := parsePage(t, body)
	banner := node(t, doc, "section", "data-testid", "run-failure")
	if got, want := textOf(banner), "The run failed: the model could not be reached or refused. "+detail; got != want {
		t.Errorf("banner: %q, want %q", got, want)
	}
	if first := nodes(node(t, doc, "main", "", ""), "section", "", ""); len(first) == 0 || first[0] != banner {
		t.Error("the failure is not the page's first section")
	}

	admin := a.as(t, "admin")
	admin.get("/playground")
	req := admin.postRequest("/playground/runs", url.Values{"configuration": {"broken"}, "prompt": {"Refund W-1"}}, "text/html")
	res, body := admin.do(req)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("playground run: %d", res.StatusCode)
	}
	doc = parsePage(t, body)
	run := node(t, doc, "div", "data-testid", "playground-run")
	if got, want := textOf(node(t, run, "section", "data-testid", "run-failure")),
		"The run failed: the model could not be reached or refused. "+detail; got != want {
		t.Errorf("playground banner: %q, want %q", got, want)
	}
	if got := textOf(node(t, doc, "p", "data-testid", "playground-error")); got != "The run failed: the model could not be reached or refused." {
		t.Errorf("playground outcome: %q", got)
	}
}

// TestBrowserRunPageFits: in Chromium, the ten-round run's page is a
// couple of screens high (the JSON of every step was 6,700 px), at a
// desktop width and at 390 px, and its toggles open.
func TestBrowserRunPageFits(t *testing.T) {
	a := newApp(t, 0)
	id := tenRounds(t, a)
	b := openTab(t, a, false)
	b.signIn("owner")
	for _, size := range []struct {
		width, height int64
		screens       float64 // how many screens the timeline may take
	}{{1280, 900, 2}, {390, 844, 4}} {
		b.do("open the run's page", stepTimeout,
			chromedp.EmulateViewport(size.width, size.height),
			chromedp.Navigate(b.base+runPath(id, "")),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid="timeline"]`)),
			loaded())
		height := get(b, "measure the timeline", chromedp.Evaluate[float64](
			`document.querySelector('[data-testid="timeline"]').getBoundingClientRect().height`))
		page := get(b, "measure the page", chromedp.Evaluate[float64](`document.documentElement.scrollHeight`))
		// The conversation above the timeline reads every round as a
		// message (see TestConversationFitsA390PixelScreen): the budget
		// is the rest of the page's.
		conv := get(b, "measure the conversation", chromedp.Evaluate[float64](
			`document.querySelector('[data-testid="conversation"]').getBoundingClientRect().height`))
		t.Logf("at %d px wide: the timeline is %.0f px high, the page %.0f px with a conversation of %.0f px", size.width, height, page, conv)
		page -= conv
		if limit := size.screens * float64(size.height); height > limit {
			t.Errorf("at %d px wide the timeline is %.0f px high, want at most %.0f (%.0f screens)", size.width, height, limit, size.screens)
		}
		if limit := (size.screens + 1) * float64(size.height); page > limit {
			t.Errorf("at %d px wide the page is %.0f px high, want at most %.0f", size.width, page, limit)
		}
		wide := get(b, "measure the width", chromedp.Evaluate[float64](`document.documentElement.scrollWidth`))
		if wide > float64(size.width) {
			t.Errorf("at %d px wide the page scrolls sideways (%.0f px)", size.width, wide)
		}
	}
	sel := `li[data-kind="tool"] details[data-testid="step-result"]`
	b.do("open a result", stepTimeout, chromedp.Click(chromedp.CSS(sel+` > summary`)))
	if open := get(b, "read the toggle", chromedp.Evaluate[bool](`document.querySelector('`+sel+`').open`)); !open {
		t.Error("a click on a result's summary does not open it")
	}
}
