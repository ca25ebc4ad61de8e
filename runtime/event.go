package runtime

import (
	"encoding/json"
	"time"
)

// EventKind names what a recorded step was.
type EventKind string

// The kinds of event; each recorded event is one step.
const (
	KindLLM      EventKind = "llm"
	KindTool     EventKind = "tool"
	KindSuspend  EventKind = "suspend"
	KindApproval EventKind = "approval"
	KindInput    EventKind = "input"
	KindCancel   EventKind = "cancel"
	KindSettle   EventKind = "settle"
	// KindUnavailable records tools the configuration names that could
	// not be brought (an MCP server down, refusing its token, or missing
	// its ${ENV}), and why.
	KindUnavailable EventKind = "unavailable"
	// KindTurnStarted and KindTurnEnded open and close a turn of a
	// conversation (see conversation.go).
	KindTurnStarted EventKind = "turn_started"
	KindTurnEnded   EventKind = "turn_ended"
)

// Step reports whether an event of this kind is a step a continuation
// took — what stream lines, counters and metrics count. A turn's marks are
// not: they ride along with the commit that starts or settles it.
func (k EventKind) Step() bool { return k != KindTurnStarted && k != KindTurnEnded }

// Event is one row of a run's event log. Payload has passed the
// configuration's privacy filter; Decode reads it into its kind's struct.
type Event struct {
	RunID int64 `json:"-" db:"run_id"`
	Seq   int   `json:"seq" db:"seq"`
	// Turn is the conversation's turn the event belongs to.
	Turn       int             `json:"turn" db:"turn"`
	Kind       EventKind       `json:"kind" db:"kind"`
	Round      int             `json:"round" db:"round"`
	DurationMS int64           `json:"duration_ms" db:"duration_ms"`
	Payload    json.RawMessage `json:"payload" db:"payload"`
	CreatedAt  time.Time       `json:"created_at" db:"created_at"`
}

// Step is what an observer sees of a recorded event: the stored event, and
// the content before the privacy filter for viewers allowed to see it.
type Step struct {
	Event
	// Full is the event's payload before the privacy filter. It is never
	// stored; only surfaces that may show content (the playground) use it.
	Full json.RawMessage `json:"-"`
}

// Observer is told of each step right after it is committed. It runs on the
// continuation's goroutine and must not block for long.
type Observer interface {
	OnStep(Step)
}

// DeltaObserver is an Observer that also wants the provider's text and
// thinking as they stream, before the round is recorded as a step:
// coalesced over at most DeltaEvery, in order, each with its turn, and
// every piece of a round before the round's step. It is called on the
// continuation's goroutine or on a timer's, never on two at once.
type DeltaObserver interface {
	Observer
	OnDelta(Delta)
}

// ToolObserver is an Observer that also wants to know when a tool call
// starts, before its step is recorded: a long call then shows as what it
// is ("refund_order, 12 s…") rather than as silence. It is called on the
// continuation's goroutine.
type ToolObserver interface {
	Observer
	OnToolStart(name string)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Step)

// OnStep calls f.
func (f ObserverFunc) OnStep(s Step) { f(s) }

type noObserver struct{}

func (noObserver) OnStep(Step) {}
