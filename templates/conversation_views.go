package templates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A run's page shows its transcript as a conversation: turn by turn, what
// the person wrote, what the model answered, the calls it made and what
// the tools returned, each as a person reads it (a call's arguments and a
// JSON result as a list of keys and values, never raw JSON). This file
// holds the shapes; web fills them from the engine's conversation.

// Conversation is the part of a run's conversation a page shows: a window
// of its latest turns (ConversationWindow of them), with links to the
// turns before and after the window.
type Conversation struct {
	RunID int64
	// Owner is the name of the person who wrote the user messages.
	Owner string
	Turns []ConversationTurn
	// Total is the conversation's number of turns; First and Last the
	// turns shown.
	Total, First, Last int
	// Earlier and Later link to the turns before and after those shown;
	// "" when there are none.
	Earlier, Later string
}

// ConversationWindow is how many turns a run's page shows at once.
const ConversationWindow = 5

// ConversationTurn is one turn: the person's message and what followed.
type ConversationTurn struct {
	Number   int
	Messages []ConversationMessage
}

// ConversationMessage is one message of a turn. Role is user, assistant or
// tool; a message that does not open here has none, and Unreadable says
// why.
type ConversationMessage struct {
	ID   int
	Role string
	// Text is what the person or the model wrote; TextWithheld, when not
	// 0, the size of a text the privacy level does not show.
	Text         string
	TextWithheld int
	// Thinking is the model's reasoning, shown folded; ThinkingWithheld,
	// when not 0, the size of one the privacy level does not show.
	Thinking         string
	ThinkingWithheld int
	// Streaming marks an answer still being written: its text so far.
	Streaming bool
	Calls     []ConversationCall
	// Result is a tool's answer, for a tool message.
	Result *ConversationResult
	At     time.Time
	// Unreadable says why the message does not open here.
	Unreadable string
}

// ConversationCall is one tool call the model made.
type ConversationCall struct {
	ID, Name  string
	Arguments Readable
}

// ConversationResult is a tool's answer to a call.
type ConversationResult struct {
	CallID, Tool string
	Error        bool
	Value        Readable
}

// Readable is a JSON value (a call's arguments, a tool's result) for
// people: an object as its fields, anything else as text (a JSON list or
// scalar indented), or its size when the privacy level withholds it.
type Readable struct {
	Fields   []ReadableField
	Text     string
	Withheld bool
	Size     int
}

// ReadableField is one key of an object and its value: a scalar as text,
// a nested object or list as indented JSON (Block).
type ReadableField struct {
	Key, Value string
	Block      bool
}

// Empty reports whether there is nothing to show: an empty object, say.
func (r Readable) Empty() bool { return !r.Withheld && len(r.Fields) == 0 && r.Text == "" }

// foldAt is how many fields or lines a result shows before it folds.
const foldAt = 6

// Long reports whether a value is long enough to fold: more than foldAt
// fields or lines.
func (r Readable) Long() bool {
	return len(r.Fields) > foldAt || strings.Count(r.Text, "\n") >= foldAt
}

// summaryText is a folded value's summary: "result · 9 fields".
func summaryText(what string, r Readable) string {
	if len(r.Fields) > 0 {
		return what + " · " + plural(len(r.Fields), "field", "fields")
	}
	return what + " · " + plural(strings.Count(strings.TrimRight(r.Text, "\n"), "\n")+1, "line", "lines")
}

// ReadableValue shapes a value for people. v is a string (a tool's result,
// read as JSON when it is an object or a list), a json.RawMessage (a
// call's arguments), or a decoded JSON value (what redaction leaves).
func ReadableValue(v any) Readable {
	switch x := v.(type) {
	case nil:
		return Readable{}
	case string:
		t := strings.TrimSpace(x)
		if !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "[") {
			return Readable{Text: x}
		}
		decoded, ok := decodeJSON([]byte(t))
		if !ok {
			return Readable{Text: x}
		}
		v = decoded
	case json.RawMessage:
		decoded, ok := decodeJSON(x)
		if !ok {
			return Readable{Text: string(x)}
		}
		v = decoded
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Readable{Text: scalarText(v)}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := Readable{Fields: make([]ReadableField, 0, len(keys))}
	for _, k := range keys {
		f := ReadableField{Key: k}
		switch e := obj[k].(type) {
		case map[string]any, []any:
			f.Value, f.Block = indented(e), true
		default:
			f.Value = scalarText(e)
		}
		out.Fields = append(out.Fields, f)
	}
	return out
}

// decodeJSON decodes one JSON value, its numbers kept as written.
func decodeJSON(b []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil || d.More() {
		return nil, false
	}
	return v, true
}

// scalarText is a JSON scalar as a person reads it; a list or an object
// indented.
func scalarText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "none"
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case json.Number:
		return x.String()
	}
	return indented(v)
}

func indented(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// withheldText says what the privacy level keeps of a message's content.
func withheldText(what string, r Readable) string {
	return fmt.Sprintf("%s: %s, not shown at this agent's privacy level", what, plural(r.Size, "byte", "bytes"))
}

// turnsText says which turns a window shows: "Turns 3–7 of 7".
func turnsText(c Conversation) string {
	if c.First == c.Last {
		return fmt.Sprintf("Turn %d of %d", c.First, c.Total)
	}
	return fmt.Sprintf("Turns %d–%d of %d", c.First, c.Last, c.Total)
}

// author is who wrote a message, for its head line.
func author(c Conversation, m ConversationMessage) string {
	switch m.Role {
	case "user":
		if c.Owner != "" {
			return c.Owner
		}
		return "Person"
	case "assistant":
		return "Agent"
	case "tool":
		return "Tool"
	}
	return "Unreadable message"
}

func turnID(n int) string { return fmt.Sprintf("turn-%d", n) }
