package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// maxSteps is the highest step count among progress and keepalive lines.
func maxSteps(lines []map[string]any) float64 {
	n := -1.0
	for _, l := range lines {
		if s, ok := l["steps"].(float64); ok && s > n {
			n = s
		}
	}
	return n
}

// TestTwoTabsFollowOneContinuation: a second tab approving a run whose
// approval the first tab won is not refused: its stream says whose
// decision it follows, counts the same steps as the winner's and ends on
// settled, with a flash that says who decided and how the run ended. The
// tool ran once.
func TestTwoTabsFollowOneContinuation(t *testing.T) {
	a := newApp(t, 200*time.Millisecond)
	paused, order := a.Waiting(t, "slow")
	path := inboxPath(paused.RunID, "decision")
	first, second := a.signIn(t, "approver"), a.signIn(t, "admin")

	res, err := first.http.Do(first.postRequest(path, approve(paused.Digest), "application/x-ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	winner := testrig.Read(t, res.Body, time.Now())
	defer winner.Close()
	if l, err := winner.Line(0, 10*time.Second); err != nil || l.Type() != "progress" {
		t.Fatalf("the first tab's first line = %v, %v; want progress (the claim won)", l, err)
	}

	res2, lines, raw := streamLines(t, second, path, approve(paused.Digest))
	if res2.StatusCode != http.StatusOK || res2.Header.Get("Content-Type") != "application/x-ndjson; charset=utf-8" {
		t.Fatalf("the second tab got %d %q, want a stream", res2.StatusCode, res2.Header.Get("Content-Type"))
	}
	won, err := winner.Wait(t, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	winnerLines, winnerRaw := testrig.Split(won)

	if len(lines) < 3 || lines[0]["type"] != "following" || lines[len(lines)-1]["type"] != "settled" {
		t.Fatalf("the second tab's lines = %v, want following first and settled last", raw)
	}
	d, _ := lines[0]["decision"].(map[string]any)
	if d["by"] != "approver" || d["kind"] != "approve" || d["scope"] != "once" || d["decided_at"] == nil {
		t.Errorf("following line = %s, want approver's approval with its time", raw[0])
	}
	if _, ok := d["reason"]; ok {
		t.Errorf("following line = %s: an approve grant may not read the run, so no reason", raw[0])
	}
	for _, l := range lines[1 : len(lines)-1] {
		if l["type"] != "progress" && l["type"] != "keepalive" {
			t.Errorf("unexpected line %v in the follower's stream", l)
		}
	}
	if winnerLines[len(winnerLines)-1]["type"] != "settled" {
		t.Errorf("the first tab's lines = %v, want settled last", winnerRaw)
	}
	// approval, refund, llm, lookup, llm, lookup, llm, settle: 7 or more,
	// and the same count in both tabs.
	if got, want := maxSteps(lines), maxSteps(winnerLines); got != want || want < 5 {
		t.Errorf("the follower counted %v steps, the winner %v; want the same, at least 5:\n%v\n%v", got, want, raw, winnerRaw)
	}
	flash := regexp.MustCompile(`^Run \d+ was approved by approver at \d\d:\d\d:\d\d UTC; run \d+ completed`)
	if got := second.flashText(); !flash.MatchString(got) {
		t.Errorf("the second tab's flash = %q, want one matching %s", got, flash)
	}
	if n := a.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
	if s := a.State(t, paused.RunID); s.Decisions != 1 || s.Run.Status != runtime.StatusCompleted {
		t.Errorf("run %s with %d decisions, want completed with 1", s.Run.Status, s.Decisions)
	}
}

// TestAPIStreamedLoserFollows: a streamed API decision whose turn someone
// else won follows their continuation: following, step lines, the
// outcome; the owner, who may read the run, sees the steps' stored
// content and the answer.
func TestAPIStreamedLoserFollows(t *testing.T) {
	a := newApp(t, 200*time.Millisecond)
	paused, order := a.Waiting(t, "slow")
	if _, err := a.Engine.Decide(t.Context(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Reason: "fine", Actor: a.Users["admin"].Actor(), Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	// A worker carries the admin's decision out while the owner follows.
	ctx, stop := context.WithCancel(t.Context())
	worked := make(chan struct{})
	go func() { defer close(worked); a.Engine.Work(ctx, 1, 50*time.Millisecond) }()
	t.Cleanup(func() { stop(); <-worked })
	got := a.bearer(t, "owner", "run:decide").call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"),
		approveBody(t, paused.Digest), http.Header{"Accept": {"application/x-ndjson"}})
	lines := got.lines(t)
	if got.status != http.StatusOK || len(lines) < 3 {
		t.Fatalf("status %d, body %s; want a stream", got.status, got.body)
	}
	if lines[0]["type"] != "following" || lines[0]["status"] == nil {
		t.Errorf("first line = %v, want following with the run's status", lines[0])
	}
	if d, _ := lines[0]["decision"].(map[string]any); d["by"] != "admin" || d["reason"] != "fine" {
		t.Errorf("decision = %v, want the admin's, with its reason for the owner", lines[0]["decision"])
	}
	steps := 0
	for _, l := range lines[1 : len(lines)-1] {
		switch l["type"] {
		case "step":
			steps++
			if st, _ := l["step"].(map[string]any); st["content"] == nil {
				t.Errorf("step line %v without content, for the owner", l)
			}
		case "keepalive":
		default:
			t.Errorf("unexpected line %v", l)
		}
	}
	last := lines[len(lines)-1]
	if last["type"] != "done" || last["answer"] != "done" || steps < 5 {
		t.Errorf("last line %v after %d steps, want done with the answer after at least 5 steps", last, steps)
	}
	if n := a.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
}

// TestAPIPlainLoserIsToldTheDecision: a plain API loser gets 409 with the
// decision (no reason for a decider who may not read the run) and the
// run's status.
func TestAPIPlainLoserIsToldTheDecision(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "slow")
	if _, err := a.Engine.Decide(t.Context(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionDeny, Reason: "MARKER-REASON", Actor: a.Users["owner"].Actor(), Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	got := a.bearer(t, "approver", "run:decide").call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"),
		approveBody(t, paused.Digest), nil)
	m := got.object(t)
	if got.status != http.StatusConflict {
		t.Fatalf("status %d, want 409: %s", got.status, got.body)
	}
	if e, _ := m["error"].(map[string]any); e["code"] != "already_resuming" {
		t.Errorf("error = %v, want already_resuming", m["error"])
	}
	d, _ := m["decision"].(map[string]any)
	if d["by"] != "owner" || d["kind"] != "deny" || d["scope"] != "once" || d["decided_at"] == nil {
		t.Errorf("decision = %v, want the owner's denial", d)
	}
	if m["status"] != string(runtime.StatusDecided) {
		t.Errorf("status = %v, want decided", m["status"])
	}
	if strings.Contains(string(got.body), "MARKER") {
		t.Errorf("body %s shows the reason to a decider who may not read the run", got.body)
	}
}

// TestStrangerLoserStillNotFound: who may not decide a run learns nothing
// from a lost claim either.
func TestStrangerLoserStillNotFound(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "slow")
	if _, err := a.Engine.Decide(t.Context(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: a.Users["admin"].Actor(), Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	c := a.signIn(t, "other")
	res, body := c.raw(inboxPath(paused.RunID, "decision"), url.Values{"turn_digest": {paused.Digest},
		"decision": {"approve"}, "csrf_token": {c.csrf}}.Encode(), http.Header{"Accept": {"application/x-ndjson"}})
	if res.StatusCode != http.StatusNotFound || strings.Contains(body, "following") {
		t.Errorf("a stranger's streamed approval got %d %q, want the 404 page", res.StatusCode, body)
	}
}

// TestOpenAPIDescribesALostClaim holds a real lost claim's 409 body
// against the LostClaim schema of web/openapi.json: every key it sends is
// documented, every required one is sent, and both decision routes' 409s
// name the schema.
func TestOpenAPIDescribesALostClaim(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	type object struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]object `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/runs/{id}/decisions", "/api/runs/{id}/input"} {
		if !strings.Contains(string(doc.Paths[p]["post"]), `"#/components/schemas/LostClaim"`) {
			t.Errorf("POST %s does not name LostClaim among its answers", p)
		}
	}
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "slow")
	if _, err := a.Engine.Decide(t.Context(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Reason: "ok", Actor: a.Users["owner"].Actor(), Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	got := a.bearer(t, "owner", "run:decide").call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"),
		approveBody(t, paused.Digest), nil)
	body := got.object(t)
	for schema, value := range map[string]map[string]any{"LostClaim": body, "DecisionSummary": body["decision"].(map[string]any)} {
		s := doc.Components.Schemas[schema]
		for k := range value {
			if _, ok := s.Properties[k]; !ok {
				t.Errorf("%s: the answer sends %q, which the document does not describe", schema, k)
			}
		}
		for _, k := range s.Required {
			if _, ok := value[k]; !ok {
				t.Errorf("%s: the document requires %q, which the answer lacks: %s", schema, k, got.body)
			}
		}
	}
}

// TestBrowserTwoPagesApproveOneCard: two people press Approve on the same
// card in two browsers. The second page follows the first one's
// continuation: both counters move, both pages come back to the inbox
// with the outcome, and the refund happened once.
func TestBrowserTwoPagesApproveOneCard(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "slow")
	first, second := openTab(t, a, true), openTab(t, a, true)
	// The second page has not heard of the first decision yet (its feed
	// lags, or is cut): with the feed, its card would leave the page as
	// "approved by approver" before the click, which the feed's own
	// browser test covers.
	second.do("cut the second page's feed", stepTimeout, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, network.SetBlockedURLs, network.SetBlockedURLsParams{
			URLPatterns: []*network.BlockPattern{{URLPattern: second.base + "/api/feed*", Block: true}}})
		return err
	}))
	first.signIn("approver")
	second.signIn("admin")
	sel := runSelector(paused.RunID)
	approveButton := sel + ` button[name="decision"][value="approve"]`

	first.do("click Approve in the first page", stepTimeout, chromedp.Click(chromedp.CSS(approveButton)))
	get(first, "wait for the first page's first step", chromedp.Poll[bool](
		`(() => { const el = document.querySelector('`+sel+` [data-testid="progress"]'); return !!el && Number(el.getAttribute('data-steps')) >= 1; })()`,
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(stepTimeout)))
	second.do("click Approve in the second page", stepTimeout, chromedp.Click(chromedp.CSS(approveButton)))
	seen := get(second, "watch the second page's counter move", chromedp.PollFunction[progressSeen](watchProgress,
		chromedp.WithPollingMutation(), chromedp.WithPollingArgs(sel), chromedp.WithPollingTimeout(stepTimeout)))
	if !strings.Contains(seen.Text, "step") {
		t.Errorf("the second page's progress = %q, want a step count", seen.Text)
	}

	if got, want := first.landOnInbox(sel, settleTimeout), fmt.Sprintf("You approved refund_order; run %d completed: the agent finished.", paused.RunID); got != want {
		t.Errorf("the first page's flash = %q, want %q", got, want)
	}
	flash := regexp.MustCompile(fmt.Sprintf(`^Run %d was approved by approver at \d\d:\d\d:\d\d UTC; run %d completed`, paused.RunID, paused.RunID))
	if got := second.landOnInbox(sel, settleTimeout); !flash.MatchString(got) {
		t.Errorf("the second page's flash = %q, want one matching %s", got, flash)
	}
	posts := second.posts(fmt.Sprintf("/inbox/runs/%d/decision", paused.RunID))
	if len(posts) != 1 || posts[0].status != http.StatusOK {
		t.Errorf("the second page's decision requests = %+v, want one stream answered 200", posts)
	}
	wantSettled(t, a, paused.RunID, order)
}

// TestFollowerHoldsNoSlot: a follower runs nothing, so while it follows,
// only the winner's continuation holds one of the --max-continuations
// slots.
func TestFollowerHoldsNoSlot(t *testing.T) {
	a := newApp(t, 200*time.Millisecond)
	paused, _ := a.Waiting(t, "silent") // a 2.5 s silent tool after the approval
	path := inboxPath(paused.RunID, "decision")
	first, second := a.signIn(t, "approver"), a.signIn(t, "admin")
	open := func(c *client) *testrig.Stream {
		t.Helper()
		res, err := c.http.Do(c.postRequest(path, approve(paused.Digest), "application/x-ndjson"))
		if err != nil {
			t.Fatal(err)
		}
		s := testrig.Read(t, res.Body, time.Now())
		t.Cleanup(s.Close)
		return s
	}
	winner := open(first)
	if l, err := winner.Line(0, 10*time.Second); err != nil || l.Type() != "progress" {
		t.Fatalf("the winner's first line = %v, %v", l, err)
	}
	follower := open(second)
	if l, err := follower.Line(0, 10*time.Second); err != nil || l.Type() != "following" {
		t.Fatalf("the follower's first line = %v, %v", l, err)
	}
	used := a.scrapeMetrics(t).value(t, "turnstile_continuation_slots_used")
	if winner.Ended() {
		t.Skip("the winner ended before the slots were read; nothing to compare")
	}
	if used != 1 {
		t.Errorf("%v continuation slots in use with one continuation and one follower, want 1", used)
	}
	if _, err := follower.Wait(t, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if l := follower.Lines(); l[len(l)-1].Type() != "settled" {
		t.Errorf("the follower's last line = %v, want settled", l[len(l)-1])
	}
}
