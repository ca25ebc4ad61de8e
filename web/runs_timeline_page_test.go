package web

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
	"github.com/turnstile-dev/turnstile/templates/htmltest"
)

// The run page's timeline from stored events: the payloads read by their
// kind's struct (timeline) and rendered (templates.RunDetail), and the
// playground's failure completed from its settle step.

// Events as the store returns them, their payloads as
// runtime/continuation.go records them, at the full privacy level.
var fullEvents = []runtime.Event{
	{Seq: 1, Kind: "llm", Round: 1, DurationMS: 812, CreatedAt: now, Payload: json.RawMessage(`{"text": "Let me look up ORD-17 first.",
		"tool_calls": [{"id": "call_1", "name": "lookup_order", "arguments": {"order_id": "ORD-17"}},
			{"id": "call_2", "name": "lookup_customer", "arguments": {"customer": "Alice"}}],
		"usage": {"input_tokens": 187, "output_tokens": 23}}`)},
	{Seq: 2, Kind: "tool", Round: 1, DurationMS: 4, CreatedAt: now, Payload: json.RawMessage(`{"call_id": "call_1", "tool": "lookup_order",
		"is_error": false, "result": "{\"order_id\":\"ORD-17\",\"amount_cents\":4990}"}`)},
	{Seq: 3, Kind: "tool", Round: 1, DurationMS: 0, CreatedAt: now, Payload: json.RawMessage(`{"call_id": "call_2", "tool": "lookup_customer",
		"is_error": true, "result": "error: tool \"lookup_customer\" is not available to this agent"}`)},
	{Seq: 4, Kind: "suspend", Round: 2, CreatedAt: now, Payload: json.RawMessage(`{"kind": "approval", "digest": "d1g",
		"calls": [{"id": "call_3", "name": "refund_order", "arguments": {"order_id": "ORD-17"}}],
		"previews": {"call_3": "Refund 49.90 EUR of ORD-17 to Alice Example"},
		"note": "The previous attempt was interrupted; its effect is unknown."}`)},
	{Seq: 5, Kind: "approval", CreatedAt: now, Payload: json.RawMessage(`{"by": "olga", "decision": "approve", "calls": 1, "scope": "once",
		"reason": "Alice called; the parcel is lost."}`)},
	{Seq: 6, Kind: "suspend", Round: 3, CreatedAt: now, Payload: json.RawMessage(`{"kind": "input", "digest": "d2g",
		"calls": [{"id": "call_4", "name": "ask_operator", "arguments": {"question": "How much?"}}]}`)},
	{Seq: 7, Kind: "input", CreatedAt: now, Payload: json.RawMessage(`{"by": "olga", "decision": "input", "calls": 1}`)},
	{Seq: 8, Kind: "unavailable", CreatedAt: now, Payload: json.RawMessage(`{"unavailable": [{"source": "crm", "tools": "crm_*",
		"cause": "the server refused its token (401)"}]}`)},
	{Seq: 9, Kind: "cancel", CreatedAt: now, Payload: json.RawMessage(`{"requested": true}`)},
	{Seq: 10, Kind: "settle", Round: 3, CreatedAt: now, Payload: json.RawMessage(`{"status": "completed", "reason": "completed",
		"answer": "Refunded 49.90 EUR.", "iterations": 3, "usage": {"input_tokens": 600, "output_tokens": 80}}`)},
}

func eventsOf(t *testing.T, doc *html.Node, want int) []*html.Node {
	t.Helper()
	events := htmltest.FindAll(doc, htmltest.Is("li", "data-testid", "event"))
	if len(events) != want {
		t.Fatalf("events: got %d, want %d", len(events), want)
	}
	return events
}

// inDetails reports whether n sits inside a <details>.
func inDetails(n *html.Node) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type == html.ElementNode && p.Data == "details" {
			return true
		}
	}
	return false
}

// wantText fails unless the one element matching inside n reads want.
func wantText(t *testing.T, n *html.Node, what string, match func(*html.Node) bool, want string) {
	t.Helper()
	if got := htmltest.Text(htmltest.One(t, n, what, match)); got != want {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

// TestTimelineByKind: each kind reads as what happened, content folded
// where it is long, and the stored JSON of every event behind a toggle.
func TestTimelineByKind(t *testing.T) {
	p := templates.RunPage{Page: samplePage(), Run: templates.RunSummary{ID: 9, Status: "completed", Reason: "completed"}, Events: timeline(fullEvents)}
	_, doc := htmltest.Render(t, templates.RunDetail(p))
	events := eventsOf(t, doc, len(fullEvents))
	for i, e := range events {
		htmltest.WantAttr(t, e, "data-kind", string(fullEvents[i].Kind))
		raw := htmltest.One(t, e, "raw JSON", htmltest.Is("pre", "data-testid", "event-raw"))
		if !inDetails(raw) {
			t.Errorf("event %d: its JSON is not behind a toggle", i+1)
		}
	}
	for _, pre := range htmltest.FindAll(htmltest.One(t, doc, "timeline", htmltest.Is("ol", "data-testid", "timeline")), htmltest.Is("pre")) {
		if !inDetails(pre) {
			t.Errorf("a <pre> outside a toggle: %q", htmltest.Text(pre))
		}
	}

	model := events[0]
	wantText(t, model, "model text", htmltest.Is("", "data-testid", "step-text"), "Let me look up ORD-17 first.")
	calls := htmltest.FindAll(model, htmltest.Is("", "data-testid", "step-call"))
	if len(calls) != 2 {
		t.Fatalf("model calls: got %d, want 2", len(calls))
	}
	wantText(t, calls[0], "call tool", htmltest.Is("code", "class", "tool"), "lookup_order")
	args := htmltest.One(t, calls[0], "arguments", htmltest.Is("pre", "data-testid", "step-arguments"))
	if !inDetails(args) || !strings.Contains(htmltest.Text(args), `"order_id": "ORD-17"`) {
		t.Errorf("arguments %q are not folded, indented JSON", htmltest.Text(args))
	}
	wantText(t, model, "head", htmltest.Is("p", "class", "event-head"), "#1 Model round 1 812 ms 187 in · 23 out tokens 12:00:00")
	htmltest.WantAttr(t, htmltest.One(t, model, "time", htmltest.Is("time")), "title", "2026-03-01 12:00:00 UTC")

	result := events[1]
	wantText(t, result, "tool", htmltest.Is("code", "data-testid", "step-tool"), "lookup_order")
	folded := htmltest.One(t, result, "result", htmltest.Is("details", "data-testid", "step-result"))
	if _, open := htmltest.Attr(folded, "open"); open {
		t.Error("the result is unfolded, want it folded")
	}
	if got := htmltest.Text(htmltest.One(t, folded, "result text", htmltest.Is("pre"))); !strings.Contains(got, `"amount_cents": 4990`) {
		t.Errorf("result: got %q, want the JSON result indented", got)
	}
	wantText(t, folded, "result summary", htmltest.Is("summary"), "result · 4 lines")
	htmltest.None(t, result, "error badge", htmltest.Is("", "data-testid", "step-error"))
	htmltest.WantAttr(t, result, "class", "event event-tool")

	failed := events[2]
	htmltest.One(t, failed, "error badge", htmltest.Is("", "data-testid", "step-error"))
	htmltest.WantAttr(t, failed, "class", "event event-tool event-error")

	pause := events[3]
	wantText(t, pause, "pause", htmltest.Is("", "data-testid", "step-pause"), "Waits for approval of refund_order")
	wantText(t, pause, "preview", htmltest.Is("", "data-testid", "step-preview"), "Refund 49.90 EUR of ORD-17 to Alice Example")
	htmltest.One(t, pause, "note", htmltest.Is("p", "role", "note"))

	approval := events[4]
	decision := htmltest.One(t, approval, "decision", htmltest.Is("p", "data-testid", "step-decision"))
	htmltest.WantAttr(t, decision, "data-decision", "approve")
	if got, want := htmltest.Text(decision), "olga approved 1 call only this time"; got != want {
		t.Errorf("approval: got %q, want %q", got, want)
	}
	wantText(t, approval, "reason", htmltest.Is("", "data-testid", "step-reason"), "Alice called; the parcel is lost.")

	wantText(t, events[5], "input pause", htmltest.Is("", "data-testid", "step-pause"), "Waits for input to ask_operator")
	wantText(t, events[6], "input", htmltest.Is("p", "data-testid", "step-decision"), "olga answered")
	htmltest.None(t, events[6], "scope of an input", htmltest.Is("", "data-testid", "step-scope"))
	wantText(t, events[7], "unavailable", htmltest.Is("", "data-testid", "step-unavailable"),
		"crm_* from crm: the server refused its token (401)")
	htmltest.One(t, events[8], "cancel", htmltest.Is("", "data-testid", "step-cancel"))

	settle := events[9]
	wantText(t, settle, "settle", htmltest.Is("", "data-testid", "step-settle"), "completed the agent finished")
	wantText(t, settle, "answer", htmltest.Is("", "data-testid", "step-answer"), "Refunded 49.90 EUR.")
	wantText(t, settle, "totals", htmltest.Is("", "data-testid", "step-tokens"), "3 rounds · 600 in · 80 out tokens")

	htmltest.None(t, doc, "failure banner", htmltest.Is("", "data-testid", "run-failure"))
}

// TestTimelineMetadata: at the metadata level content is only its size,
// and the page says so instead of showing nothing.
func TestTimelineMetadata(t *testing.T) {
	events := []runtime.Event{
		{Seq: 1, Kind: "llm", Round: 1, Payload: json.RawMessage(`{"text_bytes": 120, "usage": {"input_tokens": 1, "output_tokens": 2},
			"tool_calls": [{"id": "call_1", "name": "refund_order", "arguments_bytes": 42}]}`)},
		{Seq: 2, Kind: "tool", Round: 1, Payload: json.RawMessage(`{"call_id": "call_1", "tool": "refund_order", "is_error": false, "result_bytes": 1}`)},
		{Seq: 3, Kind: "suspend", Round: 1, Payload: json.RawMessage(`{"kind": "approval", "digest": "d",
			"calls": [{"id": "call_1", "name": "refund_order", "arguments_bytes": 42}], "previews_bytes": 57}`)},
		{Seq: 4, Kind: "settle", Round: 1, Payload: json.RawMessage(`{"status": "completed", "reason": "completed", "answer_bytes": 12, "iterations": 1}`)},
		{Seq: 5, Kind: "llm", Round: 2, Payload: json.RawMessage(`{"text_bytes": 0, "tool_calls": [{"id": "call_2", "name": "lookup_order", "arguments_bytes": 2}]}`)},
	}
	_, doc := htmltest.Render(t, templates.RunDetail(templates.RunPage{Page: samplePage(), Run: templates.RunSummary{ID: 3, Status: "completed"}, Events: timeline(events)}))
	got := eventsOf(t, doc, 5)
	wantText(t, got[0], "text", htmltest.Is("", "data-testid", "step-text"), "text: 120 bytes (not stored at this privacy level)")
	wantText(t, got[0], "call", htmltest.Is("span", "data-testid", "step-call"),
		"calls refund_order arguments: 42 bytes (not stored at this privacy level)")
	wantText(t, got[1], "result", htmltest.Is("", "data-testid", "step-result"), "result: 1 byte (not stored at this privacy level)")
	if !strings.Contains(htmltest.Text(got[2]), "previews: 57 bytes (not stored at this privacy level)") {
		t.Errorf("pause %q does not say its previews were withheld", htmltest.Text(got[2]))
	}
	wantText(t, got[3], "answer", htmltest.Is("", "data-testid", "step-answer"), "answer: 12 bytes (not stored at this privacy level)")
	htmltest.None(t, got[4], "the size of no text", htmltest.Is("", "data-testid", "step-text"))
	for _, e := range got {
		htmltest.None(t, e, "folded content", htmltest.Is("details", "class", "fold"))
	}
}

// TestTimelineRedacted: at the redacted level the shape shows with its
// values hidden.
func TestTimelineRedacted(t *testing.T) {
	events := []runtime.Event{
		{Seq: 1, Kind: "llm", Round: 1, Payload: json.RawMessage(`{"text": "[redacted]",
			"tool_calls": [{"id": "call_1", "name": "refund_order", "arguments": {"order_id": "[redacted]"}}]}`)},
		{Seq: 2, Kind: "tool", Round: 1, Payload: json.RawMessage(`{"call_id": "call_1", "tool": "refund_order", "is_error": false, "result": "[redacted]"}`)},
	}
	_, doc := htmltest.Render(t, templates.RunDetail(templates.RunPage{Page: samplePage(), Run: templates.RunSummary{ID: 3}, Events: timeline(events)}))
	got := eventsOf(t, doc, 2)
	wantText(t, got[0], "text", htmltest.Is("", "data-testid", "step-text"), "[redacted]")
	if a := htmltest.Text(htmltest.One(t, got[0], "arguments", htmltest.Is("pre", "data-testid", "step-arguments"))); !strings.Contains(a, `"order_id": "[redacted]"`) {
		t.Errorf("arguments: got %q", a)
	}
	wantText(t, got[1], "result", htmltest.Is("details", "data-testid", "step-result"), "result · 1 line [redacted]")
}

// TestTimelineUnknownPayload: an event of a kind the page does not know,
// or whose payload is not JSON, shows its head and its JSON only.
func TestTimelineUnknownPayload(t *testing.T) {
	events := []runtime.Event{
		{Seq: 1, Kind: "observer", Payload: json.RawMessage(`{"tool": "slow_task"}`)},
		{Seq: 2, Kind: "llm", Payload: json.RawMessage(`not json`)},
		{Seq: 3, Kind: "settle"},
	}
	_, doc := htmltest.Render(t, templates.RunDetail(templates.RunPage{Page: samplePage(), Run: templates.RunSummary{ID: 3}, Events: timeline(events)}))
	got := eventsOf(t, doc, 3)
	for i, e := range got[:2] {
		if n := len(htmltest.FindAll(e, htmltest.Is("p"))); n != 1 {
			t.Errorf("event %d: %d paragraphs, want only its head", i+1, n)
		}
		htmltest.One(t, e, "raw", htmltest.Is("pre", "data-testid", "event-raw"))
	}
	htmltest.None(t, got[2], "raw of an empty payload", htmltest.Is("pre", "data-testid", "event-raw"))
}

// TestRunFailureBanner: a failed run says why at the top of its page: its
// reason in words and the cause its settle event recorded.
func TestRunFailureBanner(t *testing.T) {
	settle := runtime.Event{Seq: 2, Kind: "settle", Round: 1, Payload: json.RawMessage(`{"status": "failed", "reason": "provider_failed",
		"answer_bytes": 0, "iterations": 0,
		"detail": "provider failed: openai: the model endpoint refused the API key (401)"}`)}
	p := templates.RunPage{Page: samplePage(), Run: templates.RunSummary{ID: 5, Status: "failed", Reason: "provider_failed"},
		Events: timeline([]runtime.Event{{Seq: 1, Kind: "llm", Payload: json.RawMessage(`{}`)}, settle})}
	_, doc := htmltest.Render(t, templates.RunDetail(p))
	banner := htmltest.One(t, doc, "banner", htmltest.Is("section", "data-testid", "run-failure"))
	htmltest.WantAttr(t, banner, "data-reason", "provider_failed")
	if got, want := htmltest.Text(banner), "The run failed: the model could not be reached or refused. "+
		"provider failed: openai: the model endpoint refused the API key (401)"; got != want {
		t.Errorf("banner: got %q, want %q", got, want)
	}
	main := htmltest.One(t, doc, "main", htmltest.Is("main"))
	var first *html.Node
	for d := range main.Descendants() {
		if d.Type == html.ElementNode && (d.Data == "section" || d.Data == "ol") {
			first = d
			break
		}
	}
	if first != banner {
		t.Error("the failure is not the first section of the page")
	}

	p.Events = nil
	p.Run.Reason = "max_iterations"
	_, doc = htmltest.Render(t, templates.RunDetail(p))
	wantText(t, doc, "banner without a settle event", htmltest.Is("section", "data-testid", "run-failure"),
		"The run failed: it reached its limit of rounds.")

	p.Run.Status, p.Run.Reason = "completed", "completed"
	_, doc = htmltest.Render(t, templates.RunDetail(p))
	htmltest.None(t, doc, "banner of a completed run", htmltest.Is("", "data-testid", "run-failure"))
}

// TestPlaygroundFailure: the playground's result of a failed run says why
// at its top, with the cause from its settle step, and its outcome says
// the reason in words.
func TestPlaygroundFailure(t *testing.T) {
	r := templates.PlaygroundResult{RunID: 8, Configuration: "Refund", Steps: []templates.PlaygroundStep{{Seq: 1, Kind: "settle",
		Content: "{\n  \"detail\": \"provider failed: openai: the model endpoint failed (HTTP 502)\",\n  \"reason\": \"provider_failed\",\n  \"status\": \"failed\"\n}"}},
		Outcome: templates.PlaygroundOutcome{Event: "error", Code: "provider_failed",
			Message: "The run failed: the model could not be reached or refused.", Failure: &templates.RunFailure{Reason: "provider_failed"}}}
	r.Outcome = withSettleDetail(r.Outcome, r.Steps)
	_, doc := htmltest.Render(t, templates.Playground(templates.PlaygroundPage{Page: samplePage(), Result: &r}))
	run := htmltest.One(t, doc, "run line", htmltest.Is("div", "data-testid", "playground-run"))
	wantText(t, run, "banner", htmltest.Is("section", "data-testid", "run-failure"),
		"The run failed: the model could not be reached or refused. provider failed: openai: the model endpoint failed (HTTP 502)")
	outcome := htmltest.One(t, doc, "outcome", htmltest.Is("div", "data-testid", "playground-outcome"))
	wantText(t, outcome, "heading", htmltest.Is("h3"), "Failed")
	wantText(t, outcome, "message", htmltest.Is("p", "data-testid", "playground-error"),
		"The run failed: the model could not be reached or refused.")

	r.Outcome = templates.PlaygroundOutcome{Event: "error", Code: "handed_over", Message: "this server is stopping; a worker finishes the run"}
	_, doc = htmltest.Render(t, templates.Playground(templates.PlaygroundPage{Page: samplePage(), Result: &r}))
	htmltest.None(t, doc, "banner of a run that did not fail", htmltest.Is("", "data-testid", "run-failure"))
	wantText(t, doc, "heading", htmltest.Is("h3"), "Stopped")
}

func TestTimelineNamesEditedCalls(t *testing.T) {
	events := []runtime.Event{{Seq: 1, Kind: "approval", CreatedAt: now, Payload: json.RawMessage(`{"by": "olga", "decision": "approve", "calls": 2,
		"scope": "once", "edited": ["call_3"], "arguments_bytes": 40}`)}}
	_, doc := htmltest.Render(t, templates.RunDetail(templates.RunPage{Page: samplePage(), Run: templates.RunSummary{ID: 9, Status: "running"}, Events: timeline(events)}))
	wantText(t, doc, "edited", htmltest.Is("", "data-testid", "step-edited"), "with 1 call edited: call_3")
}

// An approval event of an expiry names no person: the timeline says
// nobody decided in time, and the reason says how long it waited.
func TestTimelineOfAnExpiry(t *testing.T) {
	e := timelineEvent(runtime.Event{Seq: 3, Kind: "approval",
		Payload: json.RawMessage(`{"by": "", "expired": true, "decision": "deny", "calls": 1, "scope": "once", "reason": "no decision within 24h0m0s"}`)})
	if e.Decision == nil || e.Decision.By != "Nobody in time" || e.Decision.Reason != "no decision within 24h0m0s" {
		t.Errorf("decision step = %+v, want by nobody in time, with the reason", e.Decision)
	}
	if e := timelineEvent(runtime.Event{Seq: 3, Kind: "approval", Payload: json.RawMessage(`{"by": "olga", "decision": "deny"}`)}); e.Decision.By != "olga" {
		t.Errorf("a person's decision reads as by %q", e.Decision.By)
	}
}

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func samplePage() templates.Page {
	return templates.Page{Title: "Inbox", User: &templates.User{Name: "olga"}, CSRF: "tok-123", Flash: "Run 7 completed."}
}
