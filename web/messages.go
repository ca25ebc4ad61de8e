package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// Reading a conversation: GET /api/runs/:id/messages pages it as JSON,
// and the run's page shows a window of its latest turns.

// messageJSON is a message of a conversation as the API shows it. Every
// key is always there; content a privacy level withholds is null, with
// its size beside it.
type messageJSON struct {
	ID           int     `json:"id"`
	Turn         int     `json:"turn"`
	Role         *string `json:"role"` // null for a message that does not open here
	Content      *string `json:"content"`
	ContentBytes *int    `json:"content_bytes,omitempty"`
	// Thinking is the reasoning the model streamed with an answer, where
	// it did (absent otherwise); null with its size where the privacy
	// level withholds it.
	Thinking      *string        `json:"thinking,omitempty"`
	ThinkingBytes *int           `json:"thinking_bytes,omitempty"`
	ToolCalls     []toolCallJSON `json:"tool_calls"`
	ToolCallID    *string        `json:"tool_call_id"`
	ToolName      string         `json:"tool_name,omitempty"`
	IsError       bool           `json:"is_error,omitempty"`
	CreatedAt     string         `json:"created_at"`
	// Streaming says the message is the answer of a round still being
	// written: its text so far, as last written (at most 1.5 s old).
	Streaming  bool   `json:"streaming"`
	Unreadable string `json:"unreadable,omitempty"`
}

// toolCallJSON is a call the model made, its arguments null (with their
// size) where the privacy level withholds them.
type toolCallJSON struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Arguments      any    `json:"arguments"`
	ArgumentsBytes *int   `json:"arguments_bytes,omitempty"`
}

// apiMessages is GET /api/runs/:id/messages?after=<cursor>&limit=N: a
// page of the conversation, oldest first, to the run's readers (404 for
// anyone else, as for a missing run), with the cursor of the next page
// (null on the last).
func (s *Server) apiMessages(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := s.runParam(w, r, s.at.api, ps)
	if !ok {
		return
	}
	q, err := messageQuery(r)
	if err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	page, err := s.engine.Conversation(r.Context(), id, actor, q)
	if err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	out := make([]messageJSON, len(page.Messages))
	for i, m := range page.Messages {
		out[i] = toMessageJSON(m)
	}
	var next *string
	if page.Next != nil {
		c := page.Next.String()
		next = &c
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"messages": out, "next": next,
		"privacy_level": page.Configuration.PrivacyLevel})
}

// messageQuery reads ?after and ?limit: bad ones are invalid_request
// refusals, whatever the run.
func messageQuery(r *http.Request) (runtime.MessageQuery, error) {
	q := runtime.MessageQuery{Limit: runtime.DefaultMessagePage}
	v := r.URL.Query()
	if l := v.Get("limit"); l != "" || v.Has("limit") {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > runtime.MaxMessagePage || strconv.Itoa(n) != l {
			return q, invalid(fmt.Sprintf("limit must be an integer from 1 to %d", runtime.MaxMessagePage))
		}
		q.Limit = n
	}
	if c := v.Get("after"); c != "" || v.Has("after") {
		cur, err := runtime.ParseMessageCursor(c)
		if err != nil {
			return q, err
		}
		q.After = &cur
	}
	return q, nil
}

func toMessageJSON(m runtime.ConversationMessage) messageJSON {
	j := messageJSON{ID: m.ID, Turn: m.Turn, ToolCalls: make([]toolCallJSON, len(m.ToolCalls)),
		CreatedAt: m.CreatedAt.UTC().Format(timeFormat), ToolName: m.ToolName, IsError: m.IsError, Unreadable: m.Unreadable,
		Streaming: m.Streaming}
	if m.Unreadable != "" {
		return j
	}
	j.Role = &m.Role
	if m.Text.Withheld {
		j.ContentBytes = &m.Text.Size
	} else {
		text, _ := m.Text.Value.(string)
		j.Content = &text
	}
	if m.Thinking.Withheld {
		j.ThinkingBytes = &m.Thinking.Size
	} else if text, ok := m.Thinking.Value.(string); ok {
		j.Thinking = &text
	}
	if m.Role == "tool" {
		j.ToolCallID = &m.ToolCallID
	}
	for i, c := range m.ToolCalls {
		call := toolCallJSON{ID: c.ID, Name: c.Name, Arguments: c.Arguments.Value}
		if c.Arguments.Withheld {
			call.ArgumentsBytes = &c.Arguments.Size
		} else if raw, ok := c.Arguments.Value.(json.RawMessage); ok && len(raw) == 0 {
			call.Arguments = nil
		}
		j.ToolCalls[i] = call
	}
	return j
}

// conversation is the window of a run's conversation its page shows: the
// ConversationWindow turns that end before ?before_turn (the latest when
// it is absent), with links to the turns before and after them. A bad
// before_turn is an invalid_request refusal.
func (s *Server) conversation(r *http.Request, run *runtime.Run, cfg *runtime.Configuration, owner string) (templates.Conversation, error) {
	total := max(run.ConversationTurn, 1)
	c := templates.Conversation{RunID: run.ID, Owner: owner, Total: total, Last: total}
	if v := r.URL.Query().Get("before_turn"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 || n > total+1 || strconv.Itoa(n) != v {
			return c, invalid(fmt.Sprintf("before_turn must be a turn from 2 to %d", total+1))
		}
		c.Last = n - 1
	}
	c.First = max(1, c.Last-templates.ConversationWindow+1)
	msgs, err := s.engine.ConversationTurns(r.Context(), run, cfg, c.First, c.Last)
	if err != nil {
		return c, err
	}
	if c.First > 1 {
		c.Earlier = fmt.Sprintf("/runs/%d?before_turn=%d#conversation-title", run.ID, c.First)
	}
	switch later := c.Last + templates.ConversationWindow; {
	case c.Last >= total:
	case later >= total:
		c.Later = fmt.Sprintf("/runs/%d#conversation-title", run.ID)
	default:
		c.Later = fmt.Sprintf("/runs/%d?before_turn=%d#conversation-title", run.ID, later+1)
	}
	for _, m := range msgs {
		if n := len(c.Turns); n == 0 || c.Turns[n-1].Number != m.Turn {
			c.Turns = append(c.Turns, templates.ConversationTurn{Number: m.Turn})
		}
		turn := &c.Turns[len(c.Turns)-1]
		turn.Messages = append(turn.Messages, conversationMessage(m))
	}
	return c, nil
}

// conversationMessage shapes a message for the run's page.
func conversationMessage(m runtime.ConversationMessage) templates.ConversationMessage {
	v := templates.ConversationMessage{ID: m.ID, Role: m.Role, At: m.CreatedAt, Unreadable: m.Unreadable, Streaming: m.Streaming}
	if m.Thinking.Withheld {
		v.ThinkingWithheld = m.Thinking.Size
	} else {
		v.Thinking, _ = m.Thinking.Value.(string)
	}
	switch {
	case m.Role == "tool":
		v.Result = &templates.ConversationResult{CallID: m.ToolCallID, Tool: m.ToolName, Error: m.IsError,
			Value: readable(m.Text)}
	case m.Text.Withheld:
		v.TextWithheld = m.Text.Size
	default:
		v.Text, _ = m.Text.Value.(string)
	}
	for _, c := range m.ToolCalls {
		v.Calls = append(v.Calls, templates.ConversationCall{ID: c.ID, Name: c.Name, Arguments: readable(c.Arguments)})
	}
	return v
}

// readable is content for people, or its size when withheld.
func readable(c runtime.Content) templates.Readable {
	if c.Withheld {
		return templates.Readable{Withheld: true, Size: c.Size}
	}
	return templates.ReadableValue(c.Value)
}
