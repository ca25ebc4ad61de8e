package web_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/seal"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// streamer thinks, then writes its answer in timed pieces, asks to refund,
// and once approved writes its last answer in pieces too, after a second
// and a half: time for a follower to attach.
const streamerConfig = `
identifier: streamer
name: Streamer
provider:
  type: scripted
  script:
    rounds:
      - deltas:
          - {text: "Weighing the refund. ", thinking: true}
          - {text: "Refunding ", after: 100ms}
          - {text: "the order ", after: 100ms}
          - {text: "now.", after: 100ms}
        tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - delay: 1500ms
        deltas:
          - {text: "The refund ", after: 100ms}
          - {text: "is done.", after: 100ms}
tools: [refund_order]
privacy_level: full
`

// writer writes one answer slowly: a first piece, and the rest long after
// the partial answer was written.
const writerConfig = `
identifier: writer
name: Writer
provider:
  type: scripted
  script:
    rounds:
      - deltas:
          - {text: "PARTIAL-FIRST ", thinking: true}
          - {text: "First part. "}
          - {text: "Second part.", after: 4s}
privacy_level: full
`

// streamRequest sends a request whose answer is NDJSON and reads its lines
// as they arrive.
func streamRequest(t testing.TB, c caller, a *testApp, method, path, body string) *testrig.Stream {
	t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	for k, v := range c.header {
		req.Header[k] = v
	}
	res, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK && res.StatusCode != http.StatusCreated {
		t.Fatalf("%s %s = %d, want a stream", method, path, res.StatusCode)
	}
	return testrig.Read(t, res.Body, time.Now())
}

// joinedText joins the text of the lines of one type, checking each names the
// turn.
func joinedText(t *testing.T, lines []testrig.Line, typ string, turn int) string {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		if l.Type() != typ {
			continue
		}
		if l.Int("turn") != turn {
			t.Errorf("%s line %s: want turn %d", typ, l.Raw, turn)
		}
		b.WriteString(l.Value["text"].(string))
	}
	return b.String()
}

// allBefore reports whether every line of type typ comes before the first
// line that first says yes to.
func allBefore(lines []testrig.Line, typ string, first func(testrig.Line) bool) bool {
	seen := false
	for _, l := range lines {
		if first(l) {
			seen = true
		}
		if l.Type() == typ && seen {
			return false
		}
	}
	return seen
}

func isLLMStep(l testrig.Line) bool {
	step, _ := l.Value["step"].(map[string]any)
	return l.Type() == "step" && step["kind"] == "llm"
}

func isLLMEvent(l testrig.Line) bool { return l.Type() == "event" && l.Value["kind"] == "llm" }

// TestDeltasReachReadersOnly: the run's owner gets the model's thinking
// and its answer as it writes them on the API's start stream (each line
// with its turn, all before the round's step, the same text as the step)
// and on the event stream; a decider who may only decide gets counts on the
// inbox's stream and no event stream at all.
func TestDeltasReachReadersOnly(t *testing.T) {
	a := newAppWith(t, 0, appEngine{configs: []string{streamerConfig}})
	owner := a.bearer(t, "owner", "run:start", "run:read")
	order := a.Order(t)
	start := streamRequest(t, owner, a, http.MethodPost, "/api/runs", `{"configuration":"streamer","prompt":"Refund `+order+`"}`)
	lines, err := start.Wait(t, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := joinedText(t, lines, "thinking", 1); got != "Weighing the refund. " {
		t.Errorf("thinking = %q, want the round's thinking", got)
	}
	if got := joinedText(t, lines, "delta", 1); got != "Refunding the order now." {
		t.Errorf("deltas = %q, want the round's answer", got)
	}
	if !allBefore(lines, "delta", isLLMStep) || !allBefore(lines, "thinking", isLLMStep) {
		t.Errorf("a piece of text came after the round's step, or no step: %v", lines)
	}
	last := lines[len(lines)-1]
	if last.Type() != "awaiting_approval" {
		t.Fatalf("last line %s, want awaiting_approval", last.Raw)
	}
	id := int64(last.Int("run_id"))

	// The owner follows the run across its pause; the approver decides
	// in the inbox, which streams counts.
	_, events := openEvents(t, a.signIn(t, "owner"), id, "follow=all")
	events.WaitFor(t, 5*time.Second, "attached", func(l testrig.Line) bool { return l.Type() == "attached" })
	approver := a.signIn(t, "approver")
	approver.get("/inbox")
	res, err := approver.http.Do(approver.postRequest(inboxPath(id, "decision"), approve(last.Value["turn_digest"].(string)), "application/x-ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	inbox, err := testrig.Read(t, res.Body, time.Now()).Wait(t, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range inbox {
		if typ := l.Type(); typ != "progress" && typ != "keepalive" && typ != "settled" || strings.Contains(l.Raw, "refund is") {
			t.Errorf("the inbox's stream sent %s: want counts only", l.Raw)
		}
	}
	if inbox[len(inbox)-1].Type() != "settled" {
		t.Errorf("the inbox's stream ended with %s, want settled", inbox[len(inbox)-1].Raw)
	}

	answer := events.WaitFor(t, 10*time.Second, "the answer's event", func(l testrig.Line) bool {
		p, _ := l.Value["payload"].(map[string]any)
		return isLLMEvent(l) && p["text"] == "The refund is done."
	})
	var got []testrig.Line
	for _, l := range events.Lines() {
		if l.Arrived.After(answer.Arrived) {
			break
		}
		if l.Type() == "delta" || l.Type() == "thinking" {
			got = append(got, l)
		}
	}
	if text := joinedText(t, got, "delta", 1); text != "The refund is done." {
		t.Errorf("the event stream's deltas before the answer's event: %q, want the answer: %v", text, events.Lines())
	}

	// Who may only decide has no event stream: the scope is run:read,
	// and a reader's scope on a decider is not enough.
	decider := a.bearer(t, "approver", "run:decide").call(t, a, http.MethodGet, eventsPath(id, ""), "", nil)
	decider.wantError(t, http.StatusForbidden, "insufficient_scope")
	reading := a.bearer(t, "approver", "run:decide", "run:read").call(t, a, http.MethodGet, eventsPath(id, ""), "", nil)
	reading.wantError(t, http.StatusNotFound, "not_found")
}

// TestPartialAnswerShowsMidTurn: a reload while the model writes shows
// the answer so far (GET /api/runs/:id/messages with streaming true, the
// run page marked as writing, its thinking folded), written at most 1.5 s
// after the first piece; once the round is recorded the conversation has
// the one whole message. With keys set the partial is sealed.
func TestPartialAnswerShowsMidTurn(t *testing.T) {
	keys := testKeys(t)
	a := newAppWith(t, 0, appEngine{configs: []string{writerConfig}, sealer: keys})
	owner := a.bearer(t, "owner", "run:start", "run:read")
	started := time.Now()
	stream := streamRequest(t, owner, a, http.MethodPost, "/api/runs", `{"configuration":"writer","prompt":"Write"}`)
	first := stream.WaitFor(t, 5*time.Second, "the first delta", func(l testrig.Line) bool { return l.Type() == "delta" })
	if first.Value["text"] != "First part. " {
		t.Errorf("first delta %s", first.Raw)
	}
	id := a.latestRun(t)

	var partial map[string]any
	if !testrig.Eventually(3500*time.Millisecond, func() bool {
		msgs := a.rawMessages(t, owner, id)
		last := msgs[len(msgs)-1]
		if last["streaming"] == true {
			partial = last
		}
		return partial != nil
	}) {
		t.Fatalf("no streaming message within 3.5 s of the first piece")
	}
	if took := time.Since(started); took > 3*time.Second {
		t.Errorf("the partial answer showed after %s, want it within 1.5 s of the first piece", took)
	}
	if partial["content"] != "First part. " || partial["thinking"] != "PARTIAL-FIRST " || partial["role"] != "assistant" || partial["turn"] != 1.0 {
		t.Errorf("streaming message = %v, want the text and thinking so far", partial)
	}
	if n := a.Count(t, `SELECT COUNT(*) FROM run_partials WHERE run_id = ? AND body LIKE '%PARTIAL-FIRST%'`, id); n != 0 {
		t.Errorf("the partial answer is stored in plain text with keys set")
	}
	_, page := a.signIn(t, "owner").get(runPath(id, ""))
	for _, want := range []string{`data-testid="message-streaming"`, "First part.", `data-testid="message-thinking"`, "PARTIAL-FIRST"} {
		if !strings.Contains(page, want) {
			t.Errorf("the run page mid-turn has no %s", want)
		}
	}

	if _, err := stream.Wait(t, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	msgs := a.rawMessages(t, owner, id)
	var assistant []map[string]any
	for _, m := range msgs {
		if m["role"] == "assistant" {
			assistant = append(assistant, m)
		}
		if m["streaming"] != false {
			t.Errorf("message %v of a settled run: want streaming false", m)
		}
	}
	if len(assistant) != 1 || assistant[0]["content"] != "First part. Second part." || assistant[0]["thinking"] != "PARTIAL-FIRST " {
		t.Errorf("assistant messages = %v, want the one whole answer with its thinking", assistant)
	}
}

// rawMessages is the first page of a run's conversation as decoded JSON, streaming or not.
func (a *testApp) rawMessages(t *testing.T, c caller, id int64) []map[string]any {
	t.Helper()
	got := c.call(t, a, http.MethodGet, runPathAPI(id, "/messages"), "", nil).wantKeys(t, http.StatusOK, "messages")
	var out []map[string]any
	for _, m := range got["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

// testKeys are state keys: run content is sealed.
func testKeys(t *testing.T) runtime.Sealer {
	t.Helper()
	keys, err := seal.Parse("A:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xC3}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestStreamedLoserGetsTheWinnersText: the owner's streamed decision that
// lost to the approver's follows the winner's continuation and gets its
// text as it is written; the approver, who may only decide, gets none on
// the winning stream.
func TestStreamedLoserGetsTheWinnersText(t *testing.T) {
	a := newAppWith(t, 0, appEngine{configs: []string{streamerConfig}})
	paused, _ := a.Start(t, testrig.Launch{Configuration: "streamer"})
	body := approveBody(t, paused.Digest)
	path := runPathAPI(paused.RunID, "/decisions")
	winner := streamRequest(t, a.bearer(t, "approver", "run:decide"), a, http.MethodPost, path, body)
	winner.WaitFor(t, 5*time.Second, "the approval's step", func(l testrig.Line) bool { return l.Type() == "step" })
	loser, err := streamRequest(t, a.bearer(t, "owner", "run:decide"), a, http.MethodPost, path, body).Wait(t, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if loser[0].Type() != "following" || loser[len(loser)-1].Type() != "done" {
		t.Fatalf("the owner's lines %v: want following first, done last", loser)
	}
	if got := joinedText(t, loser, "delta", 1); got != "The refund is done." {
		t.Errorf("the follower's deltas = %q, want the winner's answer as it was written", got)
	}
	won, err := winner.Wait(t, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range won {
		if l.Type() == "delta" || l.Type() == "thinking" || strings.Contains(l.Raw, "refund is") {
			t.Errorf("the approver's stream sent %s: a decider who may not read gets no text", l.Raw)
		}
	}
}
