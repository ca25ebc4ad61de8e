package templates

import (
	"fmt"
	"strings"
	"time"
)

// A run's page shows each stored event by its kind, shaped from its
// payload by the caller (web reads the runtime's payload structs), with
// the stored JSON itself behind a toggle. This file holds the shapes and
// how they read.

// TimelineEvent is one stored event shaped for display. At most one of
// Model, Tool, Pause, Decision, Settle and Unavailable is set, by Kind;
// none for a kind this page does not know or a payload that is not a JSON
// object, which then shows as its JSON alone.
type TimelineEvent struct {
	Seq      int
	Kind     string
	Round    int
	Duration string
	At       time.Time
	// Raw is the payload's JSON as stored, shown behind a toggle.
	Raw string

	Model       *ModelStep
	Tool        *ToolStep
	Pause       *PauseStep
	Decision    *DecisionStep
	Settle      *SettleStep
	Unavailable []UnavailableSource
	Turn        *TurnMark
}

// TurnMark is where a turn of the conversation starts or ends.
type TurnMark struct {
	Turn    int
	Started bool
	// By and Message: who sent the turn's message, and the message.
	By      string
	Message Content
	// Status and Reason: how an ended turn ended.
	Status, Reason string
}

// Content is run content (a text, arguments, a result) as the run's
// privacy level stored it.
type Content struct {
	// Text is the content as stored, JSON indented; "" when withheld.
	Text string
	// Withheld: the privacy level stored only the content's size, Size
	// bytes.
	Withheld bool
	Size     int
}

// Shown reports whether there is anything to show of c.
func (c Content) Shown() bool { return c.Withheld || c.Text != "" }

// ModelStep is a model round: what the model said and the calls it made.
type ModelStep struct {
	Text                      Content
	Calls                     []StepCall
	InputTokens, OutputTokens int
	Cancelled                 bool // a cancel cut the round short: Text is what it had written
}

// StepCall is one tool call a model round made or a pause asks about.
type StepCall struct {
	ID, Name  string
	Arguments Content
	// Preview is the tool's line about what the call would do, when the
	// privacy level kept it.
	Preview string
}

// ToolStep is a tool's result.
type ToolStep struct {
	CallID, Name string
	Error        bool
	Result       Content
	Interrupted  bool // a cancel cut a write short: whether it happened is unknown
}

// PauseStep is the run stopping for a person.
type PauseStep struct {
	Kind  string // approval or input
	Calls []StepCall
	Note  string
	// Previews is set only when the previews were withheld; kept ones are
	// on their calls.
	Previews Content
}

// DecisionStep is a person's decision: an approval or a denial (with its
// scope and reason), or an answer to an input turn.
type DecisionStep struct {
	By       string
	Decision string // approve, deny or input
	Scope    string // once or session; "" for an input
	Reason   string
	Calls    int
	// Edited are the ids of the calls an approval edited before they ran.
	Edited []string
	// PerCall is what a turn decided call by call chose for each call.
	PerCall []CallVerdict
}

// CallVerdict is one call's choice in a turn decided call by call; Reason
// is the call's own ("" when it took the decision's).
type CallVerdict struct {
	CallID, Tool, Decision, Reason string
}

// SettleStep is how the run ended.
type SettleStep struct {
	Status, Reason            string
	Answer                    Content
	Detail                    string
	Iterations                int
	InputTokens, OutputTokens int
}

// UnavailableSource is a tool source that could not bring its tools.
type UnavailableSource struct {
	Source, Tools, Cause string
}

// RunFailure is why a failed run failed, said at the top of its page and of
// the playground's result.
type RunFailure struct {
	Reason string // the termination reason
	// Detail is the cause the run recorded when it settled ("provider
	// failed: openai: the model endpoint refused the API key (401)"); ""
	// when it recorded none.
	Detail string
}

// Words is the failure's reason in words.
func (f RunFailure) Words() string { return ReasonText(f.Reason) }

// ReasonText says a termination reason in words; one it does not know as
// it is.
func ReasonText(reason string) string {
	if w, ok := map[string]string{
		"completed":                "the agent finished",
		"max_iterations":           "it reached its limit of rounds",
		"provider_failed":          "the model could not be reached or refused",
		"cancelled":                "cancelled",
		"tool_unavailable":         "a tool it needs is not available",
		"lease_lost_write_unknown": "it lost its lease while a write was in flight",
		"unreadable_state":         "its saved state cannot be read",
		"owner_deleted":            "cancelled: its owner was deleted",
	}[reason]; ok {
		return w
	}
	return strings.ReplaceAll(reason, "_", " ")
}

// runFailure is why a run failed: its reason, and the detail its last
// settle event recorded; nil for a run that did not fail.
func runFailure(status, reason string, events []TimelineEvent) *RunFailure {
	if status != "failed" {
		return nil
	}
	return &RunFailure{Reason: reason, Detail: settleDetail(events)}
}

// settleDetail is the detail of the last settle event; "" when there is
// none.
func settleDetail(events []TimelineEvent) string {
	for i := len(events) - 1; i >= 0; i-- {
		if s := events[i].Settle; s != nil {
			return s.Detail
		}
	}
	return ""
}

// kindLabel names an event's kind for people.
func kindLabel(kind string) string {
	if l, ok := map[string]string{
		"llm":          "Model",
		"tool":         "Tool",
		"suspend":      "Paused",
		"approval":     "Decision",
		"input":        "Input",
		"cancel":       "Cancel",
		"settle":       "Ended",
		"unavailable":  "Tools unavailable",
		"turn_started": "Turn",
		"turn_ended":   "Turn ended",
	}[kind]; ok {
		return l
	}
	return kind
}

// withheld says what the privacy level left out of a content key:
// "text: 120 bytes (not stored at this privacy level)".
func withheld(name string, c Content) string {
	return fmt.Sprintf("%s: %s (not stored at this privacy level)", name, plural(c.Size, "byte", "bytes"))
}

// decisionText says what a decision did: "approved 1 call", "denied 2
// calls", "answered".
func decisionText(d DecisionStep) string {
	switch d.Decision {
	case "approve":
		return "approved " + plural(max(d.Calls, 1), "call", "calls")
	case "deny":
		return "denied " + plural(max(d.Calls, 1), "call", "calls")
	case "mixed":
		approved := 0
		for _, c := range d.PerCall {
			if c.Decision == "approve" {
				approved++
			}
		}
		return fmt.Sprintf("approved %d, denied %d of %s", approved, len(d.PerCall)-approved, plural(max(d.Calls, 1), "call", "calls"))
	case "input":
		return "answered"
	}
	return d.Decision
}

// verdictText says one call's choice: "approved", "denied".
func verdictText(decision string) string {
	if decision == "approve" {
		return "approved"
	}
	return "denied"
}

// scopeText says a decision's scope as the decision form does.
// editedText says which calls an approval edited: "with 1 call edited:
// call_3".
func editedText(d DecisionStep) string {
	return "with " + plural(len(d.Edited), "call", "calls") + " edited: " + strings.Join(d.Edited, ", ")
}

func scopeText(scope string) string {
	switch scope {
	case "once":
		return "only this time"
	case "session":
		return "for the rest of this run"
	}
	return scope
}

// pauseText says what a pause waits for: "Waits for approval of
// refund_order".
func pauseText(p PauseStep) string {
	names := make([]string, len(p.Calls))
	for i, c := range p.Calls {
		names[i] = c.Name
	}
	what := strings.Join(names, ", ")
	switch {
	case p.Kind == "input" && what != "":
		return "Waits for input to " + what
	case p.Kind == "input":
		return "Waits for input"
	case what != "":
		return "Waits for approval of " + what
	}
	return "Waits for approval"
}

// eventTokens is what a model round or a whole run counted: "187 in · 23
// out tokens", "10 rounds · 913 in · 113 out tokens"; "" for other events.
func eventTokens(e TimelineEvent) string {
	switch {
	case e.Model != nil:
		return tokens(e.Model.InputTokens, e.Model.OutputTokens)
	case e.Settle != nil:
		t := plural(e.Settle.Iterations, "round", "rounds")
		if n := tokens(e.Settle.InputTokens, e.Settle.OutputTokens); n != "" {
			t += " · " + n
		}
		return t
	}
	return ""
}

// tokens is "187 in · 23 out tokens"; "" when the round counted none.
func tokens(in, out int) string {
	if in == 0 && out == 0 {
		return ""
	}
	return fmt.Sprintf("%d in · %d out tokens", in, out)
}

// linesText is how long a shown content is, for the summary of its
// toggle: "1 line", "14 lines".
func linesText(c Content) string {
	return plural(strings.Count(strings.TrimRight(c.Text, "\n"), "\n")+1, "line", "lines")
}
