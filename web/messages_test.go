package web_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/seal"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// talkConfig keeps everything (privacy level full) and has a system
// prompt, which the conversation never shows: a round with two lookups
// (one of an order that does not exist, so its result is an error), a
// refund that pauses, and an answer.
const talkConfig = `
identifier: talk
name: Talk
privacy_level: full
system_prompt: "MARKER-SYSTEM you refund orders"
provider:
  type: scripted
  script:
    rounds:
      - text: "Looking it up"
        tool_calls:
          - {name: lookup_order, arguments: {order_id: "${order_id}"}}
          - {name: lookup_order, arguments: {order_id: "ORD-NOPE"}}
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}", reason: "lost parcel"}}]
      - text: "Refunded it."
tools: [lookup_order, refund_order]
`

// message is a message of GET /api/runs/:id/messages.
type message struct {
	ID           int `json:"id"`
	Turn         int `json:"turn"`
	Role         *string
	Content      *string `json:"content"`
	ContentBytes *int    `json:"content_bytes"`
	ToolCalls    []struct {
		ID             string          `json:"id"`
		Name           string          `json:"name"`
		Arguments      json.RawMessage `json:"arguments"`
		ArgumentsBytes *int            `json:"arguments_bytes"`
	} `json:"tool_calls"`
	ToolCallID *string `json:"tool_call_id"`
	ToolName   string  `json:"tool_name"`
	IsError    bool    `json:"is_error"`
	CreatedAt  string  `json:"created_at"`
	Streaming  *bool   `json:"streaming"`
	Unreadable string  `json:"unreadable"`
}

type messagePage struct {
	Messages     []message `json:"messages"`
	Next         *string   `json:"next"`
	PrivacyLevel string    `json:"privacy_level"`
}

// messages reads one page of a run's conversation, failing unless it is
// a 200.
func (a *testApp) messages(t *testing.T, c caller, id int64, query string) messagePage {
	t.Helper()
	got := c.call(t, a, http.MethodGet, runPathAPI(id, "/messages"+query), "", nil)
	got.wantKeys(t, http.StatusOK, "messages", "next", "privacy_level")
	var p messagePage
	if err := json.Unmarshal(got.body, &p); err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Messages {
		if m.Streaming == nil || *m.Streaming || m.ToolCalls == nil {
			t.Errorf("message %d: streaming %v, tool_calls %v: want false and a list", m.ID, m.Streaming, m.ToolCalls)
		}
		if _, err := time.Parse(time.RFC3339Nano, m.CreatedAt); err != nil {
			t.Errorf("message %d: created_at %q: %v", m.ID, m.CreatedAt, err)
		}
	}
	return p
}

func role(m message) string {
	if m.Role == nil {
		return "<null>"
	}
	return *m.Role
}

func contentOf(m message) string {
	if m.Content == nil {
		return "<null>"
	}
	return *m.Content
}

// completedTalk is a run of talk, approved and completed.
func completedTalk(t *testing.T, a *testApp) (runtime.Outcome, string) {
	t.Helper()
	paused, order := a.Start(t, testrig.Launch{Configuration: "talk"})
	if out := a.Approve(t, paused); out.Status != runtime.StatusCompleted {
		t.Fatalf("run %d: %s, want completed", out.RunID, out.Status)
	}
	return paused, order
}

// TestMessagesReadAsAConversation: a run with tool calls and results reads
// as the person's message, the model's messages with their calls, each
// tool's result (an error marked) and the answer, without the system
// prompt; paged by a cursor, the pages together are the whole of it.
func TestMessagesReadAsAConversation(t *testing.T) {
	a := newAppWith(t, 0, appEngine{configs: []string{talkConfig}})
	run, order := completedTalk(t, a)
	owner := a.bearer(t, "owner", "run:read")

	all := a.messages(t, owner, run.RunID, "")
	if all.Next != nil || all.PrivacyLevel != "full" {
		t.Fatalf("one page: next %v, privacy %q; want null and full", *all.Next, all.PrivacyLevel)
	}
	var roles []string
	for _, m := range all.Messages {
		roles = append(roles, role(m))
		if m.Turn != 1 {
			t.Errorf("message %d: turn %d, want 1", m.ID, m.Turn)
		}
	}
	if got, want := strings.Join(roles, " "), "user assistant tool tool assistant tool assistant"; got != want {
		t.Fatalf("roles: %s, want %s", got, want)
	}
	for i, m := range all.Messages {
		if strings.Contains(contentOf(m), "MARKER-SYSTEM") || (i > 0 && m.ID <= all.Messages[i-1].ID) {
			t.Errorf("message %d: the system prompt, or ids out of order", m.ID)
		}
	}
	m := all.Messages
	if contentOf(m[0]) != "Refund "+order || m[0].ToolCallID != nil {
		t.Errorf("the person's message: %q, tool_call_id %v", contentOf(m[0]), m[0].ToolCallID)
	}
	if contentOf(m[1]) != "Looking it up" || len(m[1].ToolCalls) != 2 || m[1].ToolCalls[0].Name != "lookup_order" {
		t.Errorf("the model's first message: %q with %d calls", contentOf(m[1]), len(m[1].ToolCalls))
	} else if got := string(m[1].ToolCalls[0].Arguments); got != `{"order_id":"`+order+`"}` {
		t.Errorf("the first call's arguments: %s", got)
	}
	if m[2].ToolCallID == nil || *m[2].ToolCallID != m[1].ToolCalls[0].ID || m[2].ToolName != "lookup_order" ||
		m[2].IsError || !strings.Contains(contentOf(m[2]), "MARKER-CUSTOMER") {
		t.Errorf("the first lookup's result: %+v, %q", m[2], contentOf(m[2]))
	}
	if !m[3].IsError || !strings.Contains(contentOf(m[3]), "ORD-NOPE not found") {
		t.Errorf("the failed lookup: is_error %v, %q", m[3].IsError, contentOf(m[3]))
	}
	if got := string(m[4].ToolCalls[0].Arguments); !strings.Contains(got, `"reason":"lost parcel"`) {
		t.Errorf("the refund's arguments: %s", got)
	}
	if contentOf(m[6]) != "Refunded it." || len(m[6].ToolCalls) != 0 {
		t.Errorf("the answer: %q", contentOf(m[6]))
	}

	// Pages of 3, 3 and 1, each from the cursor of the one before.
	var paged []message
	query, pages := "?limit=3", 0
	for {
		p := a.messages(t, owner, run.RunID, query)
		pages++
		paged = append(paged, p.Messages...)
		if p.Next == nil {
			break
		}
		if len(p.Messages) != 3 || pages > 3 {
			t.Fatalf("page %d: %d messages with a next cursor", pages, len(p.Messages))
		}
		query = "?limit=3&after=" + url.QueryEscape(*p.Next)
	}
	if pages != 3 || len(paged) != len(all.Messages) {
		t.Fatalf("%d pages, %d messages; want 3 pages of all %d", pages, len(paged), len(all.Messages))
	}
	for i := range paged {
		if paged[i].ID != all.Messages[i].ID {
			t.Errorf("paged message %d is %d, want %d", i, paged[i].ID, all.Messages[i].ID)
		}
	}
	// A page that ends exactly at the last message has no next.
	if p := a.messages(t, owner, run.RunID, "?limit=7"); p.Next != nil || len(p.Messages) != 7 {
		t.Errorf("limit=7: %d messages, next %v", len(p.Messages), p.Next)
	}
	if p := a.messages(t, owner, run.RunID, "?limit=200"); len(p.Messages) != 7 {
		t.Errorf("limit=200: %d messages", len(p.Messages))
	}
}

// TestMessagesRefuseBadPaging: a limit out of bounds or a cursor this
// server did not write is a 400 that says what to send, for any run.
func TestMessagesRefuseBadPaging(t *testing.T) {
	a := newApp(t, 0)
	run := a.start(t, "refund", "owner", runtime.OriginInteractive)
	owner := a.bearer(t, "owner", "run:read")
	for _, q := range []string{"?limit=0", "?limit=201", "?limit=abc", "?limit=", "?limit=-1", "?limit=05",
		"?after=", "?after=nonsense", "?after=" + base64.RawURLEncoding.EncodeToString([]byte("w1.2")),
		"?after=" + base64.RawURLEncoding.EncodeToString([]byte("m-1"))} {
		got := owner.call(t, a, http.MethodGet, runPathAPI(run.RunID, "/messages"+q), "", nil)
		e := got.wantError(t, http.StatusBadRequest, "invalid_request")
		if msg, _ := e["message"].(string); !strings.Contains(msg, "limit") && !strings.Contains(msg, "cursor") {
			t.Errorf("%s: message %q says neither limit nor cursor", q, msg)
		}
	}
	// The scope is run:read.
	a.bearer(t, "owner", otherScopes("run:read")...).call(t, a, http.MethodGet, runPathAPI(run.RunID, "/messages"), "", nil).
		wantError(t, http.StatusForbidden, "insufficient_scope")
}

// TestMessagesForReadersOnly: the owner and admins read a conversation;
// anyone else — a holder of the approve grant who may decide the run
// included — gets the very answer of a run that does not exist.
func TestMessagesForReadersOnly(t *testing.T) {
	a := newApp(t, 0)
	run := a.start(t, "refund", "owner", runtime.OriginInteractive) // waits for approval
	for _, who := range []string{"owner", "admin"} {
		if p := a.messages(t, a.bearer(t, who, "run:read"), run.RunID, ""); len(p.Messages) < 2 {
			t.Errorf("%s reads %d messages", who, len(p.Messages))
		}
	}
	if p := a.messages(t, a.session(t, "owner"), run.RunID, ""); len(p.Messages) < 2 {
		t.Errorf("the owner's session reads %d messages", len(p.Messages))
	}
	missing := run.RunID + 1000
	for _, who := range []string{"other", "approver"} {
		for _, c := range []caller{a.bearer(t, who, "run:read"), a.session(t, who)} {
			want := c.call(t, a, http.MethodGet, runPathAPI(missing, "/messages"), "", nil)
			got := c.call(t, a, http.MethodGet, runPathAPI(run.RunID, "/messages"), "", nil)
			got.wantError(t, http.StatusNotFound, "not_found")
			if got.status != want.status || sameID(string(got.body), run.RunID) != sameID(string(want.body), missing) {
				t.Errorf("%s (%s) is told %d %s where a missing run is %d %s", who, c.name, got.status, got.body, want.status, want.body)
			}
		}
	}
}

// TestMessagesHonourThePrivacyLevel: at the default metadata level the
// conversation withholds what the events withhold — the calls'
// arguments, the tools' results, what the model said with its calls — and
// says how large each was; the person's message and the answer show, as
// the run's prompt and answer do.
func TestMessagesHonourThePrivacyLevel(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "refund")
	a.Approve(t, paused)
	got := a.bearer(t, "owner", "run:read").call(t, a, http.MethodGet, runPathAPI(paused.RunID, "/messages"), "", nil)
	for _, marker := range []string{"MARKER-TEXT", "MARKER-ARG", "MARKER-CUSTOMER"} {
		if bytes.Contains(got.body, []byte(marker)) {
			t.Errorf("the conversation shows %s at the metadata level:\n%s", marker, got.body)
		}
	}
	p := a.messages(t, a.bearer(t, "owner", "run:read"), paused.RunID, "")
	if p.PrivacyLevel != "metadata" || len(p.Messages) != 6 {
		t.Fatalf("privacy %q, %d messages; want metadata and 6", p.PrivacyLevel, len(p.Messages))
	}
	m := p.Messages
	if contentOf(m[0]) != "Refund "+order || contentOf(m[5]) != "MARKER-ANSWER refunded" {
		t.Errorf("the prompt %q and the answer %q", contentOf(m[0]), contentOf(m[5]))
	}
	if m[1].Content != nil || m[1].ContentBytes == nil || *m[1].ContentBytes != len("MARKER-TEXT looking up") {
		t.Errorf("what the model said with its call: %q, %v bytes", contentOf(m[1]), m[1].ContentBytes)
	}
	if c := m[1].ToolCalls[0]; c.Name != "lookup_order" || string(c.Arguments) != "null" || c.ArgumentsBytes == nil || *c.ArgumentsBytes == 0 {
		t.Errorf("the call: %s %s, %v bytes", c.Name, c.Arguments, c.ArgumentsBytes)
	}
	if m[2].Content != nil || m[2].ContentBytes == nil || *m[2].ContentBytes == 0 || role(m[2]) != "tool" {
		t.Errorf("the result: %q, %v bytes", contentOf(m[2]), m[2].ContentBytes)
	}
	// The run page withholds them too.
	_, body := a.as(t, "owner").get(runPath(paused.RunID, ""))
	for _, marker := range []string{"MARKER-TEXT", "MARKER-ARG", "MARKER-CUSTOMER"} {
		if strings.Contains(body, marker) {
			t.Errorf("the run page shows %s at the metadata level", marker)
		}
	}
	doc := parsePage(t, body)
	conv := node(t, doc, "section", "data-testid", "conversation")
	args := nodes(conv, "", "data-testid", "call-arguments")
	if len(args) != 2 {
		t.Fatalf("%d calls' arguments on the page, want 2", len(args))
	}
	if got := textOf(args[0]); !strings.Contains(got, "not shown at this agent's privacy level") {
		t.Errorf("the call's arguments on the page: %q", got)
	}
}

// TestMessagesRedacted: at the redacted level a call's arguments keep
// their keys and every value is "[redacted]", and a result is
// "[redacted]", as the events store them.
func TestMessagesRedacted(t *testing.T) {
	a := newAppWith(t, 0, appEngine{configs: []string{strings.NewReplacer("identifier: talk", "identifier: hushed",
		"privacy_level: full", "privacy_level: redacted").Replace(talkConfig)}})
	paused, order := a.Start(t, testrig.Launch{Configuration: "hushed"})
	p := a.messages(t, a.bearer(t, "owner", "run:read"), paused.RunID, "")
	if len(p.Messages) < 5 {
		t.Fatalf("%d messages", len(p.Messages))
	}
	if got := string(p.Messages[1].ToolCalls[0].Arguments); got != `{"order_id":"[redacted]"}` {
		t.Errorf("redacted arguments: %s", got)
	}
	if contentOf(p.Messages[2]) != "[redacted]" || contentOf(p.Messages[1]) != "[redacted]" {
		t.Errorf("a redacted result %q and text with calls %q", contentOf(p.Messages[2]), contentOf(p.Messages[1]))
	}
	if contentOf(p.Messages[0]) != "Refund "+order {
		t.Errorf("the person's message: %q", contentOf(p.Messages[0]))
	}
}

// TestMessagesSealed: with state keys set the stored messages hold none of
// the conversation, and the API opens every one; a message moved to
// another index reads as unreadable (200), the others still open.
func TestMessagesSealed(t *testing.T) {
	keys, err := seal.Parse("A:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xB2}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	a := newAppWith(t, 0, appEngine{configs: []string{talkConfig}, sealer: keys})
	run, _ := completedTalk(t, a)
	if n := a.Count(t, `SELECT COUNT(*) FROM run_messages WHERE run_id = ? AND (body LIKE '%MARKER%' OR body LIKE '%Refund%')`, run.RunID); n != 0 {
		t.Fatalf("%d stored messages hold the conversation in the clear", n)
	}
	owner := a.bearer(t, "owner", "run:read")
	p := a.messages(t, owner, run.RunID, "")
	if len(p.Messages) != 7 || !strings.Contains(contentOf(p.Messages[2]), "MARKER-CUSTOMER") || contentOf(p.Messages[6]) != "Refunded it." {
		t.Fatalf("sealed conversation: %d messages, result %q, answer %q", len(p.Messages), contentOf(p.Messages[2]), contentOf(p.Messages[6]))
	}

	// Message 2's body copied over message 3's: bound to index 2, it does
	// not open at 3.
	if _, err := a.DB.Exec(`UPDATE run_messages SET body = (SELECT body FROM (SELECT body FROM run_messages
		WHERE run_id = ? AND idx = 2) AS m) WHERE run_id = ? AND idx = 3`, run.RunID, run.RunID); err != nil {
		t.Fatal(err)
	}
	p = a.messages(t, owner, run.RunID, "")
	var moved *message
	for i := range p.Messages {
		if p.Messages[i].ID == 3 {
			moved = &p.Messages[i]
		}
	}
	if moved == nil || moved.Unreadable == "" || moved.Role != nil || moved.Content != nil || len(p.Messages) != 7 {
		t.Fatalf("the moved message: %+v (of %d)", moved, len(p.Messages))
	}
	_, body := a.as(t, "owner").get(runPath(run.RunID, ""))
	doc := parsePage(t, body)
	if got := textOf(node(t, doc, "", "data-testid", "message-unreadable")); !strings.Contains(got, "cannot be read") {
		t.Errorf("the page's unreadable message: %q", got)
	}
}

// addTurn writes a turn of a conversation as a follow-up would: the
// run's next turn, its messages after the transcript's last, sealed with
// sealer (plain when nil).
func addTurn(t *testing.T, a *testApp, runID int64, sealer runtime.Sealer, msgs ...runtime.Message) int {
	t.Helper()
	if sealer == nil {
		sealer = runtime.Plain{}
	}
	var last struct {
		Idx  int `db:"idx"`
		Turn int `db:"turn"`
	}
	if err := a.DB.Get(&last, `SELECT MAX(idx) AS idx, MAX(turn) AS turn FROM run_messages WHERE run_id = ?`, runID); err != nil {
		t.Fatal(err)
	}
	turn := last.Turn + 1
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		idx := last.Idx + 1 + i
		if b, err = sealer.Seal(b, runtime.MessagePlace(runID, idx)); err != nil {
			t.Fatal(err)
		}
		if _, err := a.DB.Exec(`INSERT INTO run_messages (run_id, idx, turn, body) VALUES (?, ?, ?, ?)`, runID, idx, turn, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.DB.Exec(`UPDATE runs SET conversation_turn = ? WHERE id = ?`, turn, runID); err != nil {
		t.Fatal(err)
	}
	return turn
}

// followUp is a second turn: a question, a lookup and its answer.
func followUp(n int) []runtime.Message {
	id := fmt.Sprintf("call_t%d", n)
	return []runtime.Message{
		{Role: "user", Content: fmt.Sprintf("FOLLOW-%d now ORD-1002 too", n)},
		{Role: "assistant", ToolCalls: []runtime.ToolCall{{ID: id, Name: "lookup_order",
			Arguments: json.RawMessage(`{"order_id":"ORD-1002","notes":{"gift":true}}`)}}},
		{Role: "tool", ToolCallID: id, ToolName: "lookup_order", Content: `{"order_id":"ORD-1002","amount_cents":1250,"paid":true}`},
		{Role: "assistant", Content: fmt.Sprintf("ANSWER-%d ORD-1002 costs 12.50", n)},
	}
}

// TestRunPageShowsTheConversation: the run page shows the conversation
// turn by turn under a heading per turn, the person's messages, the
// model's text, its calls and the tools' results as keys and values (an
// error marked), and the API reads the second turn as turn 2.
func TestRunPageShowsTheConversation(t *testing.T) {
	a := newAppWith(t, 0, appEngine{configs: []string{talkConfig}})
	run, order := completedTalk(t, a)
	addTurn(t, a, run.RunID, nil, followUp(2)...)

	p := a.messages(t, a.bearer(t, "owner", "run:read"), run.RunID, "?limit=200")
	if len(p.Messages) != 11 || p.Messages[7].Turn != 2 || p.Messages[6].Turn != 1 || contentOf(p.Messages[7]) != "FOLLOW-2 now ORD-1002 too" {
		t.Fatalf("two turns: %d messages, %+v", len(p.Messages), p.Messages)
	}

	res, body := a.as(t, "admin").get(runPath(run.RunID, ""))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("run page: %d", res.StatusCode)
	}
	doc := parsePage(t, body)
	conv := node(t, doc, "section", "data-testid", "conversation")
	turns := nodes(conv, "section", "data-testid", "turn")
	if len(turns) != 2 {
		t.Fatalf("%d turns on the page, want 2", len(turns))
	}
	for i, turn := range turns {
		if got, want := textOf(node(t, turn, "h3", "", "")), fmt.Sprintf("Turn %d", i+1); got != want {
			t.Errorf("turn heading %q, want %q", got, want)
		}
	}
	first := nodes(turns[0], "li", "data-testid", "message")
	if len(first) != 7 {
		t.Fatalf("turn 1: %d messages, want 7", len(first))
	}
	if got := textOf(node(t, first[0], "", "data-testid", "message-text")); got != "Refund "+order {
		t.Errorf("the person's message: %q", got)
	}
	if got := textOf(first[0]); !strings.HasPrefix(got, "owner ") {
		t.Errorf("the person's message is not signed by its owner: %q", got)
	}
	calls := nodes(first[1], "div", "data-testid", "message-call")
	if len(calls) != 2 {
		t.Fatalf("the first round: %d calls, want 2", len(calls))
	}
	args := node(t, calls[0], "dl", "data-testid", "call-arguments")
	if got, want := textOf(args), "order_id "+order; got != want {
		t.Errorf("the call's arguments read %q, want %q", got, want)
	}
	result := node(t, first[2], "dl", "data-testid", "result-value")
	if got := textOf(result); !strings.Contains(got, "customer MARKER-CUSTOMER") || strings.Contains(got, "{") {
		t.Errorf("the lookup's result reads %q, want keys and values", got)
	}
	if len(nodes(first[2], "", "data-testid", "result-error")) != 0 || len(nodes(first[3], "", "data-testid", "result-error")) != 1 {
		t.Error("the failed lookup is not marked as an error, or the good one is")
	}
	if got := textOf(node(t, first[3], "pre", "data-testid", "result-value")); !strings.Contains(got, "ORD-NOPE not found") {
		t.Errorf("the failed lookup says %q", got)
	}
	second := nodes(turns[1], "li", "data-testid", "message")
	if len(second) != 4 {
		t.Fatalf("turn 2: %d messages", len(second))
	}
	gift := node(t, second[1], "dl", "data-testid", "call-arguments")
	if got := textOf(gift); !strings.Contains(got, "order_id ORD-1002") || !strings.Contains(got, `"gift": true`) {
		t.Errorf("turn 2's call: %q", got)
	}
	if got := textOf(node(t, second[2], "dl", "data-testid", "result-value")); got != "amount_cents 1250 order_id ORD-1002 paid yes" {
		t.Errorf("turn 2's result: %q", got)
	}
	if strings.Contains(body, "MARKER-SYSTEM") {
		t.Error("the page shows the system prompt")
	}
	if len(nodes(conv, "", "data-testid", "conversation-earlier")) != 0 {
		t.Error("a link to earlier turns of a 2-turn conversation")
	}
}

// TestRunPageShowsTheLatestTurns: a long conversation shows its latest
// five turns, with a link to the earlier ones, and those with a link back.
func TestRunPageShowsTheLatestTurns(t *testing.T) {
	a := newAppWith(t, 0, appEngine{configs: []string{talkConfig}})
	run, _ := completedTalk(t, a)
	for n := 2; n <= 7; n++ {
		addTurn(t, a, run.RunID, nil, followUp(n)...)
	}
	owner := a.as(t, "owner")
	shown := func(path string) (turns []string, earlier, later string) {
		t.Helper()
		res, body := owner.get(path)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, res.StatusCode)
		}
		conv := node(t, parsePage(t, body), "section", "data-testid", "conversation")
		for _, turn := range nodes(conv, "section", "data-testid", "turn") {
			v, _ := attrOf(turn, "data-turn")
			turns = append(turns, v)
		}
		for _, l := range nodes(conv, "a", "data-testid", "conversation-earlier") {
			earlier, _ = attrOf(l, "href")
		}
		for _, l := range nodes(conv, "a", "data-testid", "conversation-later") {
			later, _ = attrOf(l, "href")
		}
		return turns, earlier, later
	}
	turns, earlier, later := shown(runPath(run.RunID, ""))
	if strings.Join(turns, ",") != "3,4,5,6,7" || earlier == "" || later != "" {
		t.Fatalf("latest: turns %v, earlier %q, later %q", turns, earlier, later)
	}
	turns, earlier2, later := shown(earlier)
	if strings.Join(turns, ",") != "1,2" || earlier2 != "" || later == "" {
		t.Fatalf("earlier: turns %v, earlier %q, later %q", turns, earlier2, later)
	}
	if turns, _, _ := shown(later); strings.Join(turns, ",") != "3,4,5,6,7" {
		t.Errorf("back to the latest: %v", turns)
	}
	// A turn that is not one: back to the run's page, saying why.
	res, _ := owner.get(runPath(run.RunID, "?before_turn=99"))
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != runPath(run.RunID, "") {
		t.Errorf("before_turn=99: %d to %q, want 303 to the run", res.StatusCode, res.Header.Get("Location"))
	}
	// The API pages all 7 turns.
	p := a.messages(t, a.bearer(t, "owner", "run:read"), run.RunID, "?limit=200")
	if len(p.Messages) != 7+6*4 || p.Messages[len(p.Messages)-1].Turn != 7 {
		t.Errorf("the API reads %d messages", len(p.Messages))
	}
}
