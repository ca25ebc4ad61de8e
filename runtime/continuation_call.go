package runtime

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// A continuation's calls: which call of the model's message comes next,
// whether it needs a person, running it, and the model's rounds.

// unanswered returns the calls of the model's last message that have no
// result yet, in order.
func (c *Continuation) unanswered() []ToolCall {
	msgs := c.state.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		answered := map[string]bool{}
		for _, m := range msgs[i+1:] {
			answered[m.ToolCallID] = true
		}
		var calls []ToolCall
		for _, call := range msgs[i].ToolCalls {
			if !answered[call.ID] {
				calls = append(calls, call)
			}
		}
		return calls
	}
	return nil
}

// nextCall returns the first unanswered call. It runs before every step:
// when the results after the model's last message answer its first calls
// in order, as they nearly always do, the next call is the one after them,
// found without the set unanswered builds (a round of 100 calls made that
// a tenth of a step's CPU).
func (c *Continuation) nextCall() (ToolCall, bool) {
	msgs := c.state.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		calls, results := msgs[i].ToolCalls, msgs[i+1:]
		inOrder := len(results) <= len(calls)
		for k := 0; inOrder && k < len(results); k++ {
			inOrder = results[k].ToolCallID == calls[k].ID
		}
		if inOrder {
			if len(results) < len(calls) {
				return calls[len(results)], true
			}
			return ToolCall{}, false
		}
		break
	}
	if calls := c.unanswered(); len(calls) > 0 {
		return calls[0], true
	}
	return ToolCall{}, false
}

// tool returns a tool the configuration allows: one of its tool source's,
// or a built-in one it names.
func (c *Continuation) tool(name string) (Tool, bool) {
	if t, ok := c.extra[name]; ok {
		return t, true
	}
	for _, allowed := range c.cfg.Tools {
		if allowed == name {
			return c.e.Tool(name)
		}
	}
	return nil, false
}

// needsPerson reports whether a call waits for a person's decision.
func (c *Continuation) needsPerson(call ToolCall) bool {
	t, ok := c.tool(call.Name)
	if !ok {
		return false
	}
	spec := t.Spec()
	if spec.Asks != nil {
		return true
	}
	return c.cfg.NeedsApproval(spec) && !c.standing[standingName(t, call)]
}

// handle answers one call: executes it, or pauses the run for a person.
func (c *Continuation) handle(ctx context.Context, call ToolCall) (Outcome, bool) {
	t, ok := c.tool(call.Name)
	if !ok {
		return c.toolResult(ctx, call, "", c.missing(call.Name), 0)
	}
	spec := t.Spec()
	if call.ID == c.interrupted {
		// A write of this call was in flight when its holder died. It may
		// or may not have happened: never repeat it blindly.
		c.interrupted = ""
		delete(c.state.Verdicts, call.ID)
		if c.state.Attempts == nil {
			c.state.Attempts = map[string]int{}
		}
		c.state.Attempts[call.ID]++
		return c.suspend(ctx, PendingTurn{Kind: TurnApproval, Calls: []ToolCall{call},
			Note: interruptedNote, Attempt: c.state.Attempts[call.ID]})
	}
	if spec.Asks != nil {
		return c.suspend(ctx, PendingTurn{Kind: TurnInput, Calls: []ToolCall{call}, Schema: spec.Asks})
	}
	if c.needsPerson(call) {
		v, decided := c.state.Verdicts[call.ID]
		if !decided {
			return c.pause(ctx)
		}
		if !v.Approved {
			// apply answers denied calls; this only guards the invariant.
			return c.toolResult(ctx, call, "", fmt.Errorf("denied by %s", v.By), 0)
		}
	}
	if spec.Effect == NonIdempotentWrite {
		// Stamped before the attempt: a failed stamp may still have been
		// written, and the next commit must clear it either way.
		c.stamped = true
		err := c.e.store.MarkPendingEffect(ctx, c.run.ID, c.run.ClaimedBy, call.ID, c.e.lease)
		if errors.Is(err, ErrCancelRequested) {
			// A cancel asked for since the last step boundary (its owner's
			// deletion among them) stops the write before it starts.
			return c.cancelled(ctx), true
		}
		if err != nil {
			return c.stopped(err), true
		}
	}
	if c.halted.Err() != nil {
		// Cancelled before the call started: nothing to cut short (the
		// cancel's commit clears a stamp).
		return c.cancelled(ctx), true
	}
	if o, ok := c.obs.(ToolObserver); ok {
		o.OnToolStart(call.Name)
	}
	start := time.Now()
	end, ended := c.callTool(t, Invocation{RunID: c.run.ID, OwnerID: c.run.OwnerID, CallID: call.ID, Arguments: call.Arguments})
	if !ended {
		return c.callCut(ctx, call, spec, time.Since(start))
	}
	return c.toolResult(ctx, call, end.result, end.err, time.Since(start))
}

// missing is the result of a call of a tool the run does not have: why,
// when its source said.
func (c *Continuation) missing(name string) error {
	for _, u := range c.unavailable {
		if u.Prefix != "" && strings.HasPrefix(name, u.Prefix) {
			return fmt.Errorf("tool %q is not available: %s: %s", name, u.Source, u.Cause)
		}
	}
	return fmt.Errorf("tool %q is not available to this agent", name)
}

// unavailable collects the UnavailableErrors in a ToolSource's error.
func unavailable(err error) []*UnavailableError {
	switch e := err.(type) {
	case *UnavailableError:
		return []*UnavailableError{e}
	case interface{ Unwrap() []error }:
		var out []*UnavailableError
		for _, inner := range e.Unwrap() {
			out = append(out, unavailable(inner)...)
		}
		return out
	case interface{ Unwrap() error }:
		return unavailable(e.Unwrap())
	}
	return nil
}

// undecided lists the unanswered calls of the last message that wait for
// an approval: one turn asks about all of them at once.
func (c *Continuation) undecided() []ToolCall {
	var calls []ToolCall
	for _, call := range c.unanswered() {
		t, ok := c.tool(call.Name)
		_, decided := c.state.Verdicts[call.ID]
		if ok && !decided && t.Spec().Asks == nil && c.needsPerson(call) {
			calls = append(calls, call)
		}
	}
	return calls
}

// toolResult records a tool's result (an error becomes a result the model
// sees) and clears the pending effect in the same commit.
func (c *Continuation) toolResult(ctx context.Context, call ToolCall, result string, callErr error, took time.Duration) (Outcome, bool) {
	msg := Message{Role: "tool", ToolCallID: call.ID, ToolName: call.Name, Content: result}
	if callErr != nil {
		msg.Content, msg.IsError = "error: "+callErr.Error(), true
	}
	c.state.Messages = append(c.state.Messages, msg)
	p := ToolPayload{CallID: call.ID, Tool: call.Name, IsError: msg.IsError, Result: Content{Value: msg.Content}}
	if err := c.record(ctx, c.state.Iterations, took, p, nil); err != nil {
		return c.stopped(err), true
	}
	return Outcome{}, false
}

// providerError marks a failed round, which settles the run as failed.
type providerError struct{ err error }

func (p providerError) Error() string { return "provider failed: " + p.err.Error() }

func (p providerError) Unwrap() error { return p.err }

// round asks the provider for the next round and records it.
func (c *Continuation) round(ctx context.Context) error {
	provider, err := c.providerFor()
	if err != nil {
		return providerError{err}
	}
	var specs []ToolSpec
	for _, name := range c.cfg.Tools {
		if t, ok := c.e.Tool(name); ok {
			specs = append(specs, t.Spec())
		}
	}
	for _, t := range c.extra {
		specs = append(specs, t.Spec())
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	start := time.Now()
	flow := c.newDeltaFlow()
	res, err := provider.Round(c.calls, RoundRequest{Round: c.state.Iterations - c.state.FirstRound + 1, Model: c.cfg.Provider.Model,
		Messages: c.state.Messages, Tools: specs}, flow.add)
	if err != nil && c.halted.Err() != nil {
		// Cut short by a cancel: the round's step keeps the text it
		// streamed, so the partial answer is not kept beside it.
		flow.end(false)
		return c.roundCut(ctx, res, flow.answer(), time.Since(start))
	}
	flow.end(err != nil)
	if err != nil {
		return providerError{err}
	}
	took := time.Since(start)
	c.state.Iterations++
	c.state.Usage.InputTokens += res.Usage.InputTokens
	c.state.Usage.OutputTokens += res.Usage.OutputTokens
	c.state.Messages = append(c.state.Messages, Message{Role: "assistant", Content: res.Text, Thinking: res.Thinking, ToolCalls: res.ToolCalls})
	p := LLMPayload{Text: Content{Value: res.Text}, ToolCalls: callPayloads(res.ToolCalls), Usage: res.Usage}
	return c.record(ctx, c.state.Iterations, took, p, nil)
}

func (c *Continuation) providerFor() (Provider, error) {
	if c.provider == nil {
		p, err := c.e.providers(c.cfg)
		if err != nil {
			return nil, err
		}
		c.provider = p
	}
	return c.provider, nil
}
