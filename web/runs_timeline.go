package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// timeline shapes a run's stored events for its page.
func timeline(events []runtime.Event) []templates.TimelineEvent {
	out := make([]templates.TimelineEvent, len(events))
	for i, e := range events {
		out[i] = timelineEvent(e)
	}
	return out
}

// timelineEvent shapes one stored event by its kind, read from its
// payload's struct. A kind without one, or a payload that is not a JSON
// object, shows as its head and its JSON alone.
func timelineEvent(e runtime.Event) templates.TimelineEvent {
	v := templates.TimelineEvent{Seq: e.Seq, Kind: string(e.Kind), Round: e.Round, Duration: stepDuration(e),
		At: e.CreatedAt, Raw: indent(e.Payload)}
	p, err := e.Decode()
	if err != nil {
		return v
	}
	switch p := p.(type) {
	case *runtime.LLMPayload:
		v.Model = &templates.ModelStep{Text: shownContent(p.Text), Calls: stepCalls(p.ToolCalls, nil),
			InputTokens: p.Usage.InputTokens, OutputTokens: p.Usage.OutputTokens, Cancelled: p.Cancelled}
	case *runtime.ToolPayload:
		v.Tool = &templates.ToolStep{CallID: p.CallID, Name: p.Tool, Error: p.IsError, Result: shownContent(p.Result),
			Interrupted: p.Interrupted}
	case *runtime.SuspendPayload:
		lines, _ := p.Previews.Value.(map[string]any)
		v.Pause = &templates.PauseStep{Kind: p.TurnKind, Note: p.Note, Calls: stepCalls(p.Calls, lines)}
		if previews := shownContent(p.Previews); previews.Withheld {
			v.Pause.Previews = previews
		}
	case *runtime.ApprovalPayload:
		v.Decision = &templates.DecisionStep{By: p.By, Decision: p.Decision, Scope: p.Scope, Reason: p.Reason,
			Calls: p.Calls, Edited: p.Edited}
		for _, c := range p.PerCall {
			v.Decision.PerCall = append(v.Decision.PerCall, templates.CallVerdict{CallID: c.CallID, Tool: c.Tool,
				Decision: c.Decision, Reason: c.Reason})
		}
		if p.Expired {
			v.Decision.By = "Nobody in time" // a worker denied the expired pause
		}
	case *runtime.InputPayload:
		v.Decision = &templates.DecisionStep{By: p.By, Decision: p.Decision, Calls: p.Calls}
		if p.Expired {
			v.Decision.By = "Nobody in time"
		}
		if v.Decision.Decision == "" {
			v.Decision.Decision = runtime.DecisionInput
		}
	case *runtime.SettlePayload:
		v.Settle = &templates.SettleStep{Status: string(p.Status), Reason: p.Reason, Answer: shownContent(p.Answer),
			Detail: p.Detail}
		if p.Iterations != nil {
			v.Settle.Iterations = *p.Iterations
		}
		if p.Usage != nil {
			v.Settle.InputTokens, v.Settle.OutputTokens = p.Usage.InputTokens, p.Usage.OutputTokens
		}
	case *runtime.TurnStartedPayload:
		v.Turn = &templates.TurnMark{Turn: p.Turn, Started: true, By: p.By, Message: shownContent(p.Content)}
	case *runtime.TurnEndedPayload:
		v.Turn = &templates.TurnMark{Turn: p.Turn, Status: string(p.Status), Reason: p.Reason}
	case *runtime.UnavailablePayload:
		for _, u := range p.Unavailable {
			v.Unavailable = append(v.Unavailable, templates.UnavailableSource{Source: u.Source, Tools: u.Tools, Cause: u.Cause})
		}
	}
	return v
}

// shownContent is run content as the page shows it: the stored value as
// text, or its size when the privacy level withheld it. Zero bytes is no
// content (a round that only called tools), which is nothing to mention.
func shownContent(c runtime.Content) templates.Content {
	switch {
	case c.Value != nil:
		return templates.Content{Text: jsonText(c.Value)}
	case c.Withheld && c.Size > 0:
		return templates.Content{Withheld: true, Size: c.Size}
	}
	return templates.Content{}
}

// stepCalls shapes a list of calls; previews, when kept, maps call ids to
// their preview lines.
func stepCalls(calls []runtime.CallPayload, previews map[string]any) []templates.StepCall {
	var out []templates.StepCall
	for _, c := range calls {
		call := templates.StepCall{ID: c.ID, Name: c.Name, Arguments: shownContent(c.Arguments)}
		if line, ok := previews[c.ID].(string); ok {
			call.Preview = line
		}
		out = append(out, call)
	}
	return out
}

// jsonText is a content value for people: a string as it is, or indented
// when it is itself a JSON object or list (a tool's result often is);
// anything else as indented JSON.
func jsonText(v any) string {
	if s, ok := v.(string); ok {
		t := strings.TrimSpace(s)
		if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			var buf bytes.Buffer
			if json.Indent(&buf, []byte(t), "", "  ") == nil {
				return buf.String()
			}
		}
		return s
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// withSettleDetail completes a failed run's playground outcome with the
// cause its last settle step recorded, when the outcome has none.
func withSettleDetail(o templates.PlaygroundOutcome, steps []templates.PlaygroundStep) templates.PlaygroundOutcome {
	if o.Failure == nil || o.Failure.Detail != "" {
		return o
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].Kind != string(runtime.KindSettle) {
			continue
		}
		var p runtime.SettlePayload
		if runtime.DecodePayload(json.RawMessage(steps[i].Content), &p) == nil {
			f := *o.Failure
			f.Detail = p.Detail
			o.Failure = &f
			break
		}
	}
	return o
}
