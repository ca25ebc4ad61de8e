package web

import (
	"encoding/json"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// The lines of every NDJSON stream. Each names its kind in "type"; the
// constants are those kinds, which turnstile_stream_lines_total counts.
const (
	lineProgress  = "progress"  // inbox: a step count
	lineSettled   = "settled"   // inbox: the last line
	lineStep      = "step"      // playground and API: one step
	lineTerminal  = "terminal"  // playground and API: the last line (counted as one kind)
	lineAttached  = "attached"  // event stream: the first line
	lineEvent     = "event"     // event stream: one stored event
	lineEnd       = "end"       // event stream: the last line
	lineError     = "error"     // event stream: the store stayed unreadable
	lineKeepalive = "keepalive" // every stream
	lineFollowing = "following" // inbox, playground and API: a lost claim's stream follows the winner's
)

var lineTypes = []string{lineProgress, lineSettled, lineStep, lineTerminal, lineAttached, lineEvent, lineEnd, lineError, lineKeepalive,
	lineFollowing, lineClaimed, lineDone, lineDelta, lineThinking, lineRun}

// The live lines of text as the provider writes it (see
// runtime.DeltaObserver): the playground's and the API's continuation
// streams and the event stream send them. They are never stored as
// events, and only who may read the run gets them.
const (
	lineDelta    = "delta"    // the model's answer as it streams
	lineThinking = "thinking" // the model's reasoning as it streams
)

// textLine is a piece of the text a turn's model round streams: a delta
// of its answer, or of its thinking. A continuation's stream adds the
// turn; the event stream, whose lines each name their own, sets Turn.
type textLine struct {
	Type string `json:"type"` // lineDelta or lineThinking
	Turn int    `json:"turn,omitempty"`
	Text string `json:"text"`
}

// toTextLine is a piece of text as a line, and its kind.
func toTextLine(d runtime.Delta) (string, textLine) {
	typ := lineDelta
	if d.Thinking {
		typ = lineThinking
	}
	return typ, textLine{Type: typ, Text: d.Text}
}

// typeLine is a line that is its kind alone: keepalive, settled.
type typeLine struct {
	Type string `json:"type"`
}

// progressLine counts steps, and nothing else for a decider who holds the
// approve grant alone: it may not show a run's content. To who may read
// the run it also names the tool that runs and for how long.
type progressLine struct {
	Type   string `json:"type"`
	Steps  int64  `json:"steps"`
	Tool   string `json:"tool,omitempty"`
	ToolMS int64  `json:"tool_ms,omitempty"`
}

// stepLine is one recorded step of a playground or API stream.
type stepLine struct {
	Type string   `json:"type"`
	Seq  int      `json:"seq"`
	Step stepJSON `json:"step"`
}

// stepJSON is one step, with its full content for viewers who may read the
// run (the playground's admins, the API's run owners), else without.
type stepJSON struct {
	Seq        int             `json:"seq"`
	Kind       string          `json:"kind"`
	Round      int             `json:"round"`
	DurationMS int64           `json:"duration_ms"`
	Content    json.RawMessage `json:"content"`
}

func toStepJSON(st runtime.Step, full bool) stepJSON {
	j := stepJSON{Seq: st.Seq, Kind: string(st.Kind), Round: st.Round, DurationMS: st.DurationMS}
	if full {
		j.Content = st.Full
	}
	return j
}

// callJSON is a pending call.
type callJSON struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func pendingCalls(t *runtime.PendingTurn) []callJSON {
	calls := make([]callJSON, len(t.Calls))
	for i, c := range t.Calls {
		calls[i] = callJSON{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
	}
	return calls
}

// The kinds of the last line of a playground or API continuation.
const (
	outcomeDone             = "done"
	outcomeAwaitingApproval = "awaiting_approval"
	outcomeAwaitingInput    = "awaiting_input"
	outcomeCancelled        = "cancelled"
	outcomeError            = "error"
)

// doneLine ends a run that completed. Answer is left out for a decider who
// may not read the run.
type doneLine struct {
	Type       string        `json:"type"`
	RunID      int64         `json:"run_id"`
	Answer     *string       `json:"answer,omitempty"`
	Iterations int           `json:"iterations"`
	Usage      runtime.Usage `json:"usage"`
}

// awaitingLine ends a continuation that paused again: on an approval, or on
// an input (with the tool that asks and its schema). The calls are shown to
// every decider: deciding them is the point.
type awaitingLine struct {
	Type         string          `json:"type"`
	RunID        int64           `json:"run_id"`
	TurnDigest   string          `json:"turn_digest"`
	PendingCalls []callJSON      `json:"pending_calls"`
	Note         string          `json:"note,omitempty"`
	Tool         string          `json:"tool,omitempty"`
	Schema       json.RawMessage `json:"schema,omitempty"`
}

// endedLine ends a continuation that was cancelled (no code) or that ended
// in error.
type endedLine struct {
	Type    string `json:"type"`
	RunID   int64  `json:"run_id"`
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// outcomeKind is how a continuation ended, as its last line names it, with
// the code and message of an error.
func outcomeKind(out runtime.Outcome) (kind, code, message string) {
	switch {
	case out.Status == runtime.StatusCompleted:
		return outcomeDone, "", ""
	case out.Status == runtime.StatusWaitingForApproval:
		return outcomeAwaitingApproval, "", ""
	case out.Status == runtime.StatusWaitingForInput:
		return outcomeAwaitingInput, "", ""
	case out.Status == runtime.StatusCancelled:
		return outcomeCancelled, "", ""
	case out.Status == runtime.StatusDecided || out.Status == runtime.StatusQueued:
		return outcomeError, "handed_over", "this server is stopping; a worker finishes the run"
	case out.Status == runtime.StatusFailed:
		message = "the run failed: " + templates.ReasonText(out.Reason)
		if out.Detail != "" {
			message += " (" + out.Detail + ")"
		}
		return outcomeError, out.Reason, message
	}
	return outcomeError, "continues_elsewhere", "this request lost the run; it continues in the background"
}

// outcomeLine is the last line of a playground or API continuation, or
// its document's outcome; full says whether the viewer may read the run.
func outcomeLine(out runtime.Outcome, full bool) any {
	kind, code, message := outcomeKind(out)
	switch kind {
	case outcomeDone:
		l := doneLine{Type: kind, RunID: out.RunID, Iterations: out.Iterations, Usage: out.Usage}
		if full {
			l.Answer = &out.Answer
		}
		return l
	case outcomeAwaitingApproval, outcomeAwaitingInput:
		l := awaitingLine{Type: kind, RunID: out.RunID, TurnDigest: out.Digest, PendingCalls: pendingCalls(out.Pending),
			Note: out.Pending.Note}
		if kind == outcomeAwaitingInput {
			l.Schema = out.Pending.Schema
			if len(out.Pending.Calls) > 0 { // an input turn asks through exactly one call
				l.Tool = out.Pending.Calls[0].Name
			}
		}
		return l
	}
	return endedLine{Type: kind, RunID: out.RunID, Code: code, Message: message}
}

// attachedLine is the event stream's first line. FirstSeq is the seq of the
// first event the stream sends (after_seq+1 when there is none yet); a client
// that sees FirstSeq > after_seq+1 knows it missed events.
type attachedLine struct {
	Type      string         `json:"type"`
	Turn      int            `json:"turn"`
	FirstSeq  int            `json:"first_seq"`
	LatestSeq int            `json:"latest_seq"`
	Status    runtime.Status `json:"status"`
	Live      bool           `json:"live"`
}

// eventLine is one stored event, with its privacy-filtered payload.
type eventLine struct {
	Type       string            `json:"type"`
	Seq        int               `json:"seq"`
	Turn       int               `json:"turn"`
	Kind       runtime.EventKind `json:"kind"`
	Round      int               `json:"round"`
	DurationMS int64             `json:"duration_ms"`
	CreatedAt  string            `json:"created_at"`
	Payload    json.RawMessage   `json:"payload"`
}

type endLine struct {
	Type   string         `json:"type"`
	Status runtime.Status `json:"status"`
}

type errorLine struct {
	Type     string `json:"type"`
	Code     string `json:"code"`
	Message  string `json:"message"`
	AfterSeq int    `json:"after_seq"`
}
