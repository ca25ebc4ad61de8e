package runtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Reading a conversation: the run's transcript as a person reads it, a
// page at a time. The transcript is stored one sealed message a row
// (run_messages), each with its turn and the time it was written; a page
// is read by index, so a long conversation costs a page what the page
// holds. System messages are the configuration's, not the conversation's:
// they are not shown.
//
// What the privacy level withholds from the timeline's events the
// conversation withholds too: a call's arguments, a tool's result and
// what the model said with its calls are kept at full, shaped with every
// scalar replaced at redacted, and only their size at metadata, exactly as
// the events store them. A person's messages and the model's answers (its
// messages without calls) show at every level, as the run's prompt and
// answer do at the top of its page.

// MessageStore is what reading a conversation needs of the store.
type MessageStore interface {
	// Messages returns a run's stored transcript messages in index order,
	// their bodies as stored (sealed when a key is set): see MessageRange.
	// None is an empty list.
	Messages(ctx context.Context, runID int64, r MessageRange) ([]StoredMessage, error)
}

// MessageRange bounds a read of a run's transcript.
type MessageRange struct {
	// AfterIdx reads the messages with an index above it; -1 from the
	// first.
	AfterIdx int
	// FromTurn and ToTurn, when not 0, keep only the messages of those
	// turns (both included).
	FromTurn, ToTurn int
	Limit            int
}

// StoredMessage is one row of a run's transcript.
type StoredMessage struct {
	Idx       int       `db:"idx"`
	Turn      int       `db:"turn"`
	Body      []byte    `db:"body"`
	CreatedAt time.Time `db:"created_at"`
}

// MaxMessagePage bounds one page of a conversation; DefaultMessagePage is
// a page when the reader names no limit.
const (
	DefaultMessagePage = 50
	MaxMessagePage     = 200
)

// maxTurnMessages bounds what a window of turns (ConversationTurns) reads:
// a turn takes at most MaxIterationsCeiling rounds, each a model message
// and its calls' results, so only a conversation whose rounds call tools
// by the dozen meets it.
const maxTurnMessages = 1000

// MessageCursor is a place in a conversation: after the message of this
// index.
type MessageCursor struct{ Idx int }

// String writes the cursor for a URL; ParseMessageCursor reads it back.
func (c MessageCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte("m" + strconv.Itoa(c.Idx)))
}

// ParseMessageCursor reads what MessageCursor.String wrote; anything else
// is an invalid_request refusal.
func ParseMessageCursor(s string) (MessageCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	body, ok := strings.CutPrefix(string(b), "m")
	n, err2 := strconv.Atoi(body)
	if err != nil || !ok || err2 != nil || n < 0 || strconv.Itoa(n) != body {
		return MessageCursor{}, refuse(CodeInvalidRequest, "%v: after must be the next cursor of the page before", errCursor)
	}
	return MessageCursor{Idx: n}, nil
}

// MessageQuery asks for one page of a conversation.
type MessageQuery struct {
	After *MessageCursor // nil from the first message
	Limit int            // 1 to MaxMessagePage
}

// ConversationMessage is one message of a conversation as a reader sees
// it, its content filtered by the run's privacy level.
type ConversationMessage struct {
	// ID is the message's index in the run's transcript.
	ID   int
	Turn int
	// Role is user, assistant or tool; "" for a message that does not
	// open here (Unreadable says why).
	Role string
	// Text is what the person or the model wrote, or a tool's result: a
	// string Value, or nil with Withheld when the level keeps only its
	// size.
	Text Content
	// Thinking is the model's reasoning, at the privacy level's rule for
	// what the model says with its calls: the value at full, its shape
	// at redacted, its size otherwise; nil Value when there was none.
	Thinking   Content
	ToolCalls  []CallPayload
	ToolCallID string
	ToolName   string
	IsError    bool
	CreatedAt  time.Time
	// Unreadable says why the message does not open here; "" when it did.
	Unreadable string
	// Streaming marks the answer of a round still being written (see
	// StoredPartial): the text so far, as last written.
	Streaming bool
}

// ConversationPage is one page of a run's conversation.
type ConversationPage struct {
	Run           *Run
	Configuration *Configuration
	Messages      []ConversationMessage
	// Next is where the next page starts; nil on the last page.
	Next *MessageCursor
}

// Conversation returns a page of a visible run's conversation (see
// Visible: not_found for anyone who may not read it), oldest first.
// Refusals: not_found, and invalid_request for a limit out of bounds.
func (e *Engine) Conversation(ctx context.Context, runID int64, actor Actor, q MessageQuery) (ConversationPage, error) {
	if q.Limit < 1 || q.Limit > MaxMessagePage {
		return ConversationPage{}, refuse(CodeInvalidRequest, "limit must be an integer from 1 to %d", MaxMessagePage)
	}
	run, cfg, err := e.Visible(ctx, runID, actor)
	if err != nil {
		return ConversationPage{}, err
	}
	page := ConversationPage{Run: run, Configuration: cfg, Messages: []ConversationMessage{}}
	after := -1
	if q.After != nil {
		after = q.After.Idx
	}
	// One more than the page tells whether another follows. Only a system
	// message is skipped, and a transcript holds one at most, at its
	// start: a second read is rare and short.
	for {
		rows, err := e.store.Messages(ctx, runID, MessageRange{AfterIdx: after, Limit: q.Limit + 1})
		if err != nil {
			return ConversationPage{}, err
		}
		for _, row := range rows {
			after = row.Idx
			m, shown := e.conversationMessage(runID, cfg.PrivacyLevel, row)
			if !shown {
				continue
			}
			if len(page.Messages) == q.Limit {
				page.Next = &MessageCursor{Idx: page.Messages[len(page.Messages)-1].ID}
				return page, nil
			}
			page.Messages = append(page.Messages, m)
		}
		if len(rows) < q.Limit+1 {
			if m, ok, err := e.partialMessage(ctx, run, cfg.PrivacyLevel, after); err != nil || !ok {
				return page, err
			} else if len(page.Messages) == q.Limit {
				page.Next = &MessageCursor{Idx: page.Messages[len(page.Messages)-1].ID}
			} else {
				page.Messages = append(page.Messages, m)
			}
			return page, nil
		}
	}
}

// partialMessage is the answer a run's round is writing, when it comes
// after the transcript's message of index last (else it is stale: its
// round was recorded since, or a next turn began). It is streaming while
// the run runs; after a cancel or a failed round it is what the run kept.
func (e *Engine) partialMessage(ctx context.Context, run *Run, level PrivacyLevel, last int) (ConversationMessage, bool, error) {
	p, err := e.store.Partial(ctx, run.ID)
	if errors.Is(err, ErrNotFound) || (err == nil && p.Idx <= last) {
		return ConversationMessage{}, false, nil
	}
	if err != nil {
		return ConversationMessage{}, false, err
	}
	out := ConversationMessage{ID: p.Idx, Turn: p.Turn, CreatedAt: p.UpdatedAt, Streaming: run.Status == StatusRunning}
	b, err := e.sealer.Open(p.Body, PartialPlace(run.ID))
	var m Message
	if err == nil {
		if err = json.Unmarshal(b, &m); err != nil {
			err = fmt.Errorf("runtime: decode the partial answer: %w", err)
		}
	}
	if err != nil {
		out.Unreadable = whyUnreadable(err)
		return out, true, nil
	}
	out.Role, out.Text, out.ToolCalls = "assistant", Content{Value: m.Content}, []CallPayload{}
	if m.Thinking != "" {
		out.Thinking = readerContent(level, m.Thinking)
	}
	return out, true, nil
}

// ConversationTurns returns the messages of turns from to to (both
// included) of a run the caller has read already (Visible), oldest first:
// what the run page shows. It checks no permission.
func (e *Engine) ConversationTurns(ctx context.Context, run *Run, cfg *Configuration, from, to int) ([]ConversationMessage, error) {
	rows, err := e.store.Messages(ctx, run.ID, MessageRange{AfterIdx: -1, FromTurn: from, ToTurn: to, Limit: maxTurnMessages})
	if err != nil {
		return nil, err
	}
	out := make([]ConversationMessage, 0, len(rows))
	last := -1
	for _, row := range rows {
		last = row.Idx
		if m, shown := e.conversationMessage(run.ID, cfg.PrivacyLevel, row); shown {
			out = append(out, m)
		}
	}
	if to < run.ConversationTurn {
		return out, nil
	}
	m, ok, err := e.partialMessage(ctx, run, cfg.PrivacyLevel, last)
	if ok {
		out = append(out, m)
	}
	return out, err
}

// conversationMessage opens a stored message for a reader at a privacy
// level; shown is false for a system message. A message that does not
// open here is shown as such, with its index, turn and time.
func (e *Engine) conversationMessage(runID int64, level PrivacyLevel, row StoredMessage) (ConversationMessage, bool) {
	out := ConversationMessage{ID: row.Idx, Turn: row.Turn, CreatedAt: row.CreatedAt}
	b, err := e.sealer.Open(row.Body, MessagePlace(runID, row.Idx))
	var m Message
	if err == nil {
		if err = json.Unmarshal(b, &m); err != nil {
			err = fmt.Errorf("runtime: decode message %d: %w", row.Idx, err)
		}
	}
	if err != nil {
		out.Unreadable = whyUnreadable(err)
		return out, true
	}
	if m.Role == "system" {
		return out, false
	}
	out.Role, out.ToolCallID, out.ToolName, out.IsError = m.Role, m.ToolCallID, m.ToolName, m.IsError
	if m.Thinking != "" {
		out.Thinking = readerContent(level, m.Thinking)
	}
	switch {
	case m.Content == "":
		out.Text = Content{Value: ""}
	case m.Role == "tool", m.Role == "assistant" && len(m.ToolCalls) > 0:
		// A result, and what the model said with its calls: the timeline's
		// tool and llm events.
		out.Text = readerContent(level, m.Content)
	default:
		// The person's messages and the model's answers, shown at every
		// level as the run's prompt and answer are.
		out.Text = Content{Value: m.Content}
	}
	out.ToolCalls = make([]CallPayload, len(m.ToolCalls))
	for i, c := range m.ToolCalls {
		out.ToolCalls[i] = CallPayload{ID: c.ID, Name: c.Name, Arguments: readerContent(level, c.Arguments)}
	}
	return out, true
}

// readerContent is a content value as the privacy filter stores it in an
// event: the value at full, its shape at redacted, its size otherwise.
func readerContent(level PrivacyLevel, v any) Content {
	switch level {
	case PrivacyFull:
		return Content{Value: v}
	case PrivacyRedacted:
		return Content{Value: redact(v)}
	}
	return Content{Withheld: true, Size: size(v)}
}
