package templates

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/templates/htmltest"
)

// TestReadableValue: a JSON object reads as its keys and values (nested
// values indented, booleans in words, numbers as written), anything else
// as text; a string that only looks like JSON stays as it is.
func TestReadableValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want Readable
	}{
		{"arguments", json.RawMessage(`{"order_id":"ORD-1","amount":12.50,"notify":false,"note":null}`), Readable{Fields: []ReadableField{
			{Key: "amount", Value: "12.50"}, {Key: "note", Value: "none"}, {Key: "notify", Value: "no"}, {Key: "order_id", Value: "ORD-1"}}}},
		{"a result that is JSON", `{"items":[1,2],"ok":true}`, Readable{Fields: []ReadableField{
			{Key: "items", Value: "[\n  1,\n  2\n]", Block: true}, {Key: "ok", Value: "yes"}}}},
		{"a list", `[{"a":1}]`, Readable{Text: "[\n  {\n    \"a\": 1\n  }\n]"}},
		{"plain text", "error: order ORD-9 not found", Readable{Text: "error: order ORD-9 not found"}},
		{"looks like JSON", "{not json", Readable{Text: "{not json"}},
		{"redacted", map[string]any{"order_id": "[redacted]"}, Readable{Fields: []ReadableField{{Key: "order_id", Value: "[redacted]"}}}},
		{"empty object", json.RawMessage(`{}`), Readable{Fields: []ReadableField{}}},
		{"nothing", nil, Readable{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReadableValue(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	if !ReadableValue(json.RawMessage(`{}`)).Empty() || ReadableValue("x").Empty() {
		t.Error("Empty: an empty object is, a text is not")
	}
}

// TestConversationRenders: turns under their headings, a withheld text
// said as such, the window's links, and no raw JSON for an object.
func TestConversationRenders(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := Conversation{RunID: 4, Owner: "olga", Total: 7, First: 3, Last: 7, Earlier: "/runs/4?before_turn=3",
		Turns: []ConversationTurn{{Number: 3, Messages: []ConversationMessage{
			{ID: 9, Role: "user", Text: "and ORD-2?", At: at},
			{ID: 10, Role: "assistant", TextWithheld: 12, Calls: []ConversationCall{{ID: "c1", Name: "lookup_order",
				Arguments: ReadableValue(json.RawMessage(`{"order_id":"ORD-2"}`))}}, At: at},
			{ID: 11, Role: "tool", Result: &ConversationResult{CallID: "c1", Tool: "lookup_order", Error: true,
				Value: Readable{Withheld: true, Size: 40}}, At: at},
		}}}}
	long := ReadableValue(`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7}`)
	c.Turns[0].Messages = append(c.Turns[0].Messages, ConversationMessage{ID: 12, Role: "tool",
		Result: &ConversationResult{CallID: "c2", Tool: "lookup_order", Value: long}})
	raw, doc := htmltest.Render(t, conversation(c))
	fold := htmltest.One(t, doc, "a long result folded", htmltest.Is("details", "data-testid", "result-fold"))
	if got := htmltest.Text(htmltest.One(t, fold, "its summary", htmltest.Is("summary"))); got != "result · 7 fields" {
		t.Errorf("fold summary %q", got)
	}
	if got := htmltest.Text(htmltest.One(t, doc, "heading", htmltest.Is("h3"))); got != "Turn 3" {
		t.Errorf("heading %q", got)
	}
	if got := htmltest.Text(htmltest.One(t, doc, "shown", htmltest.Is("p", "data-testid", "conversation-shown"))); got != "Turns 3–7 of 7" {
		t.Errorf("shown %q", got)
	}
	htmltest.WantAttr(t, htmltest.One(t, doc, "earlier", htmltest.Is("a", "data-testid", "conversation-earlier")), "href", "/runs/4?before_turn=3")
	htmltest.None(t, doc, "later", htmltest.Is("a", "data-testid", "conversation-later"))
	if got := htmltest.Text(htmltest.One(t, doc, "withheld text", htmltest.Is("p", "data-testid", "message-text", "class", "withheld"))); !strings.Contains(got, "12 bytes") {
		t.Errorf("withheld text %q", got)
	}
	if got := htmltest.Text(htmltest.One(t, doc, "arguments", htmltest.Is("dl", "data-testid", "call-arguments"))); got != "order_id ORD-2" {
		t.Errorf("arguments %q", got)
	}
	htmltest.One(t, doc, "error badge", htmltest.Is("span", "data-testid", "result-error"))
	if strings.Contains(raw, `{"order_id"`) || !strings.Contains(raw, "olga") {
		t.Errorf("raw JSON on the page, or the owner not named:\n%s", raw)
	}
}
