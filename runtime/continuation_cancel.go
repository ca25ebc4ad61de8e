package runtime

import (
	"context"
	"time"
)

// A cancel that arrives while the continuation is inside a model round or a
// tool call: the call's context ends (Continuation.calls), the continuation
// stops waiting, records what the call left, and settles as cancelled.

// The result of a call cut short by a cancel, which the model reads in a
// later turn of the conversation: a write's effect is unknown, as after a
// crash (interruptedNote), and nothing repeats it.
const (
	cutWriteNote = "interrupted: the run was cancelled during the call; its effect is unknown"
	cutReadNote  = "cancelled: the run was cancelled during the call"
)

// roundCut records a round that a cancel cut short: the text the provider
// returned or streamed so far becomes the model's message (without tool
// calls, which were never complete), so the transcript stays one a later
// turn can send. A round that produced nothing records nothing.
func (c *Continuation) roundCut(ctx context.Context, res RoundResult, streamed string, took time.Duration) error {
	text := res.Text
	if text == "" {
		text = streamed
	}
	if text == "" {
		return nil
	}
	c.state.Iterations++
	c.state.Usage.InputTokens += res.Usage.InputTokens
	c.state.Usage.OutputTokens += res.Usage.OutputTokens
	c.state.Messages = append(c.state.Messages, Message{Role: "assistant", Content: text})
	p := LLMPayload{Text: Content{Value: text}, ToolCalls: []CallPayload{}, Usage: res.Usage, Cancelled: true}
	return c.record(ctx, c.state.Iterations, took, p, nil)
}

// toolEnd is what a tool call returned, or the panic it raised.
type toolEnd struct {
	result string
	err    error
	panic  any
}

// callTool runs a tool call on a goroutine of its own and waits for it
// until the run is cancelled: a tool that ignores its context must not
// hold a cancelled run. ended is false when the cancel came first, or
// when the call, cancelled, failed (a write's effect is then unknown);
// its late result is dropped and logged. A panic of the tool is raised
// again here, on the continuation's goroutine, as if called directly.
func (c *Continuation) callTool(t Tool, inv Invocation) (end toolEnd, ended bool) {
	done := make(chan toolEnd, 1)
	started := time.Now()
	go func() {
		var end toolEnd
		defer func() {
			if p := recover(); p != nil {
				end = toolEnd{panic: p}
			}
			done <- end
		}()
		end.result, end.err = t.Call(c.calls, inv)
	}()
	select {
	case end = <-done:
		if end.panic != nil {
			panic(end.panic)
		}
		return end, end.err == nil || c.halted.Err() == nil
	case <-c.halted.Done():
	}
	select {
	case end = <-done:
		// Returned together with the cancel: a result is known.
		return end, end.panic == nil && end.err == nil
	default:
	}
	name, log := t.Spec().Name, c.e.log
	go func() {
		end := <-done
		log.Warn("result of a cancelled run's tool call dropped", "run", inv.RunID, "call", inv.CallID,
			"tool", name, "after", time.Since(started).Round(time.Millisecond), "failed", end.err != nil || end.panic != nil)
	}()
	return toolEnd{}, false
}

// callCut records a tool call that a cancel cut short, as its result (the
// transcript keeps every call answered). A non-idempotent write is
// recorded as interrupted: it may or may not have happened, and the run
// settles rather than repeat it; the same commit clears its pending
// effect. An idempotent write is marked so too: whether it happened is
// just as unknown, though repeating it would be harmless.
func (c *Continuation) callCut(ctx context.Context, call ToolCall, spec ToolSpec, took time.Duration) (Outcome, bool) {
	note := cutReadNote
	if spec.Effect != ReadOnly {
		note = cutWriteNote
	}
	c.state.Messages = append(c.state.Messages, Message{Role: "tool", ToolCallID: call.ID, ToolName: call.Name,
		Content: note, IsError: true})
	write := spec.Effect != ReadOnly
	p := ToolPayload{CallID: call.ID, Tool: call.Name, IsError: true, Interrupted: write, Result: Content{Value: note}}
	if err := c.record(ctx, c.state.Iterations, took, p, nil); err != nil {
		return c.stopped(err), true
	}
	if write {
		c.e.log.Info("write cut short by a cancel; its effect is unknown", "run", c.run.ID, "call", call.ID, "tool", call.Name)
	}
	return c.cancelled(ctx), true
}
