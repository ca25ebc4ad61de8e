package runtime

import (
	"errors"
)

// An event's payload is one struct per kind, below: the engine writes
// them, the privacy filter stores them (see filter), and readers get them
// back with Event.Decode or DecodePayload. A payload's JSON keys are its
// struct tags and nothing else, so a key renamed here is renamed for
// every writer and reader at once, and a field renamed fails to compile
// where it is used. Stored objects have their keys sorted, every nested
// object too, as when payloads were maps.

// EventPayload is an event's payload before the privacy filter.
type EventPayload interface {
	// Kind is the kind of event that carries the payload.
	Kind() EventKind
}

// Content is run content in a payload: a model's text, a call's
// arguments, a tool's result, previews, an answer. Everything else in a
// payload is metadata and always stored. The privacy level decides what
// of a content field is stored under its key k: at full the value, at
// redacted its shape with every scalar replaced by "[redacted]", at
// metadata only its size in bytes, under "k_bytes". With omitempty in its
// tag, a Content whose Value is nil is left out.
type Content struct {
	// Value is the content. A writer sets any JSON-encodable value (a
	// string, a json.RawMessage, a map); a reader finds the stored JSON
	// value decoded (objects as map[string]any, numbers as json.Number),
	// or nil when the level withheld it, or when it was not stored at all.
	Value any
	// Withheld says the level stored only the content's size, Size
	// bytes (0 for no content at all, a round that only called tools).
	Withheld bool
	Size     int
}

// errContentJSON stops a payload from being encoded or decoded around
// the privacy filter, which alone knows what of its content to store.
var errContentJSON = errors.New("runtime: a payload's Content is encoded by the privacy filter (filter) and read by DecodePayload, never by encoding/json")

// MarshalJSON refuses: a payload is stored through the privacy filter.
func (Content) MarshalJSON() ([]byte, error) { return nil, errContentJSON }

// UnmarshalJSON refuses: a stored payload is read with DecodePayload,
// which also reads a withheld content's size.
func (*Content) UnmarshalJSON([]byte) error { return errContentJSON }

// CallPayload is one tool call in a payload: one a model round made, or
// one a pause asks about.
type CallPayload struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Arguments Content `json:"arguments"`
}

// callPayloads are the payloads of calls; never nil, so a round without
// calls stores an empty list.
func callPayloads(calls []ToolCall) []CallPayload {
	out := make([]CallPayload, len(calls))
	for i, tc := range calls {
		out[i] = CallPayload{ID: tc.ID, Name: tc.Name, Arguments: Content{Value: tc.Arguments}}
	}
	return out
}

// LLMPayload is a model round: what the model said, the calls it made and
// what it counted.
type LLMPayload struct {
	Text      Content       `json:"text"`
	ToolCalls []CallPayload `json:"tool_calls"`
	Usage     Usage         `json:"usage"`
	// Cancelled: a cancel cut the round short; Text is what the model
	// had written by then, and its calls were dropped.
	Cancelled bool `json:"cancelled,omitempty"`
}

// Kind is KindLLM.
func (LLMPayload) Kind() EventKind { return KindLLM }

// ToolPayload is a tool's result, an error's words included.
type ToolPayload struct {
	CallID  string  `json:"call_id"`
	Tool    string  `json:"tool"`
	IsError bool    `json:"is_error"`
	Result  Content `json:"result"`
	// Interrupted: a cancel cut a write short; whether it happened is
	// unknown, and it is never repeated.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Kind is KindTool.
func (ToolPayload) Kind() EventKind { return KindTool }

// SuspendPayload is the run pausing on a turn for a person.
type SuspendPayload struct {
	TurnKind string        `json:"kind"` // TurnApproval or TurnInput
	Calls    []CallPayload `json:"calls"`
	Digest   string        `json:"digest"`
	// Previews are the tools' lines about what the calls would do, a
	// map[string]string by call id; left out when no tool previewed.
	Previews  Content `json:"previews,omitempty"`
	Note      string  `json:"note,omitempty"`
	Escalated string  `json:"escalated,omitempty"`
}

// Kind is KindSuspend.
func (SuspendPayload) Kind() EventKind { return KindSuspend }

// ApprovalPayload is a decision about an approval turn: an approval or a
// denial, by a person or by the turn's expiry.
type ApprovalPayload struct {
	By       string `json:"by"`       // the decider's name; "" for an expiry
	Decision string `json:"decision"` // DecisionApprove, DecisionDeny or DecisionMixed
	Calls    int    `json:"calls"`    // how many calls the turn had
	Expired  bool   `json:"expired,omitempty"`
	Scope    string `json:"scope"`
	Reason   string `json:"reason"`
	// Edited are the ids of the calls an approval edited before they ran,
	// and Arguments the edited arguments by call id; both left out when
	// nothing was edited.
	Edited    []string `json:"edited,omitempty"`
	Arguments Content  `json:"arguments,omitempty"`
	// PerCall is what a turn decided call by call chose for each call, in
	// the turn's order; left out for a decision of the whole turn.
	PerCall []CallVerdictPayload `json:"per_call,omitempty"`
}

// CallVerdictPayload is the choice about one call of a turn decided call
// by call. Reason is the call's own, "" when it took the decision's, and
// recorded as the decision's reason is.
type CallVerdictPayload struct {
	CallID   string `json:"call_id"`
	Tool     string `json:"tool"`
	Decision string `json:"decision"` // DecisionApprove or DecisionDeny
	Reason   string `json:"reason,omitempty"`
}

// Kind is KindApproval.
func (ApprovalPayload) Kind() EventKind { return KindApproval }

// InputPayload is a person's answer to an input turn. The answer itself
// is in the transcript, not here.
type InputPayload struct {
	By       string `json:"by"`
	Decision string `json:"decision"` // DecisionInput
	Calls    int    `json:"calls"`
	Expired  bool   `json:"expired,omitempty"`
}

// Kind is KindInput.
func (InputPayload) Kind() EventKind { return KindInput }

// CancelPayload is a cancel: one a continuation honoured at a step
// boundary (Requested), or one of an idle run, which nobody held (From).
type CancelPayload struct {
	Requested bool `json:"requested,omitempty"`
	// OwnerDeleted: the cancel came from the deletion of the run's owner.
	OwnerDeleted bool `json:"owner_deleted,omitempty"`
	// By names who cancelled an idle run; nil for any other cancel (a
	// name may be "" and is stored all the same).
	By *string `json:"by,omitempty"`
	// From is the status an idle run was cancelled from.
	From Status `json:"from,omitempty"`
}

// Kind is KindCancel.
func (CancelPayload) Kind() EventKind { return KindCancel }

// SettlePayload is how the run ended.
type SettlePayload struct {
	Status Status `json:"status"`
	Reason string `json:"reason"`
	// Answer, Iterations and Usage are what a continuation settled with;
	// the settle of an idle run's cancel, which ran nothing, leaves them
	// out (Answer's Value and the pointers nil).
	Answer     Content `json:"answer,omitempty"`
	Iterations *int    `json:"iterations,omitempty"`
	Usage      *Usage  `json:"usage,omitempty"`
	// Detail says why the run failed, in words; "" when it did not.
	Detail string `json:"detail,omitempty"`
}

// Kind is KindSettle.
func (SettlePayload) Kind() EventKind { return KindSettle }

// UnavailablePayload names the tool sources of the configuration that
// could not bring their tools, and why.
type UnavailablePayload struct {
	Unavailable []SourcePayload `json:"unavailable"`
}

// Kind is KindUnavailable.
func (UnavailablePayload) Kind() EventKind { return KindUnavailable }

// SourcePayload is one tool source that could not bring its tools.
type SourcePayload struct {
	Source string `json:"source"`
	Tools  string `json:"tools"` // the names it would have brought: "crm_*"
	Cause  string `json:"cause"`
}

// TurnStartedPayload opens a turn of a conversation: the message that
// starts it, and who sent it.
type TurnStartedPayload struct {
	Turn int `json:"turn"` // 1 for the run's first prompt
	// Content is the person's message.
	Content Content `json:"content"`
	By      string  `json:"by,omitempty"`
}

// Kind is KindTurnStarted.
func (TurnStartedPayload) Kind() EventKind { return KindTurnStarted }

// TurnEndedPayload closes a turn of a conversation: how it ended. It is
// recorded in the commit that settles the run, right after the settle.
type TurnEndedPayload struct {
	Turn   int    `json:"turn"`
	Status Status `json:"status"`
	Reason string `json:"reason"`
}

// Kind is KindTurnEnded.
func (TurnEndedPayload) Kind() EventKind { return KindTurnEnded }
