package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// DeniedPrefix starts the tool result of a call a person denied ("denied by
// <name>: <reason>"), which the model reads as the call's outcome.
const DeniedPrefix = "denied by "

// interruptedNote is shown to the decider of a write whose earlier attempt
// was interrupted: it may or may not have happened.
const interruptedNote = "The previous attempt was interrupted; its effect is unknown. Check before approving it again."

// Outcome is how a continuation ended. It is never a refusal: once a run
// is claimed, everything that happens to it is an outcome.
type Outcome struct {
	RunID int64
	// Status is the run's status afterwards: settled, waiting again, or
	// still running when the continuation had to stop (Err says why) and
	// another holder will finish it.
	Status Status
	Reason string // termination reason of a settled run
	// Detail says why a run failed, in words: the provider's error, say.
	Detail     string
	Answer     string
	Digest     string // the new turn digest of a waiting run
	Pending    *PendingTurn
	Iterations int
	Usage      Usage
	// Steps counts the steps this continuation recorded.
	Steps int
	// Err is why the continuation stopped without settling or pausing: the
	// lease was lost or the database failed. The run is not lost: a worker
	// recovers it when its lease expires.
	Err error
}

// Continuation is a claimed run, ready to be executed by its holder.
type Continuation struct {
	e        *Engine
	run      *Run
	cfg      *Configuration
	state    State
	decision *DecisionRecord // applied first, if not yet applied

	provider    Provider
	standing    map[string]bool
	stored      int    // how many transcript messages are stored
	checkpoint  []byte // the state as last stored, before sealing
	seq         int
	steps       int
	obs         Observer
	cancel      bool                // someone asked to cancel; stop at the next boundary
	interrupted string              // call id whose write was interrupted (recovery)
	stamped     bool                // a pending effect may be stamped: the next commit clears it
	unreadable  bool                // the stored state cannot be read: settle as failed
	orphaned    bool                // the owner no longer exists: cancel before any step
	extra       map[string]Tool     // the configuration's tools from its ToolSource
	unavailable []*UnavailableError // what of them the ToolSource could not bring
	lost        atomic.Bool
	// rewrite is the index of the first stored transcript message the
	// next commit writes again (an edited call's message), or -1.
	rewrite int
}

func (e *Engine) continuation(run *Run, cfg *Configuration, state State, d *DecisionRecord) *Continuation {
	return &Continuation{e: e, run: run, cfg: cfg, state: state, decision: d, rewrite: -1}
}

// RunID is the id of the claimed run.
func (c *Continuation) RunID() int64 { return c.run.ID }

// OwnerID is the id of the user who owns the claimed run.
func (c *Continuation) OwnerID() int64 { return c.run.OwnerID }

// Decided says what the decision this continuation carries out did: its
// kind (approve, deny, input) and the tools of the turn it decided; ""
// and none for a continuation that carries no decision (a start).
func (c *Continuation) Decided() (kind string, tools []string) {
	if c.decision == nil || c.state.Pending == nil {
		return "", nil
	}
	return c.decision.Kind, c.state.Pending.ToolNames()
}

// Hold keeps the claimed run's lease renewed from now until Run ends, for
// a continuation claimed now and run later (a bulk's run waiting for a
// continuation slot): without it the lease would lapse while it waits,
// and a worker would take the run over as if its holder had died.
func (c *Continuation) Hold() { c.e.leases.hold(c) }

// Run executes the run until it pauses or settles, telling obs of every
// recorded step. It goes on when ctx is cancelled (a client that went away
// must not stop a claimed run); only losing the lease or the database stops
// it early, and then the Outcome's Err says so.
func (c *Continuation) Run(ctx context.Context, obs Observer) Outcome {
	c.e.metrics.ContinuationStarted()
	defer c.e.metrics.ContinuationEnded()
	ctx = context.WithoutCancel(ctx)
	if obs == nil {
		obs = noObserver{}
	}
	c.obs = obs
	// Released even if a step panics (net/http recovers a handler's panic
	// and serves on): a lease renewed for a dead continuation would keep
	// its run from every worker.
	c.e.leases.hold(c)
	defer c.e.leases.release(c)
	defer c.e.feed.release(c)
	out := c.execute(ctx)
	out.RunID, out.Steps, out.Iterations, out.Usage = c.run.ID, c.steps, c.state.Iterations, c.state.Usage
	if out.Err != nil {
		c.e.log.Warn("continuation stopped", "run", c.run.ID, "err", out.Err)
	}
	return out
}

func (c *Continuation) execute(ctx context.Context) Outcome {
	if err := c.load(ctx); err != nil {
		return Outcome{Status: StatusRunning, Err: err}
	}
	// From here on this continuation hands its run's followers each step.
	c.e.feed.hold(c)
	if c.orphaned {
		return c.ownerGone(ctx)
	}
	if c.unreadable {
		return c.settle(ctx, StatusFailed, ReasonUnreadable, "", "the stored state cannot be read")
	}
	if c.decision != nil && c.state.Applied != c.decision.TurnDigest {
		// An escalation re-offers the turn; one whose configuration no
		// longer names a grant to escalate to is applied as the denial.
		if d := c.decision; d.Kind == DecisionEscalate && c.state.Pending != nil {
			if grant := c.cfg.TurnDeadline(c.state.Pending).EscalateGrant; grant != "" {
				return c.escalate(ctx, grant)
			}
		}
		if err := c.apply(ctx); err != nil {
			return c.stopped(err)
		}
	}
	if len(c.unavailable) > 0 {
		// On the run itself, not only in a log: its owner, the playground
		// and the event stream see why tools are missing.
		missing := make([]SourcePayload, len(c.unavailable))
		for i, u := range c.unavailable {
			missing[i] = SourcePayload{Source: u.Source, Tools: u.Prefix + "*", Cause: u.Cause}
		}
		if err := c.record(ctx, c.state.Iterations, 0, UnavailablePayload{Unavailable: missing}, nil); err != nil {
			return c.stopped(err)
		}
	}
	for {
		if c.cancel {
			return c.cancelled(ctx)
		}
		if c.e.isDraining() {
			return c.handBack(ctx)
		}
		if c.lost.Load() {
			return c.stopped(ErrLeaseLost)
		}
		if call, ok := c.nextCall(); ok {
			if out, done := c.handle(ctx, call); done {
				return out
			}
			continue
		}
		if last := c.state.Messages[len(c.state.Messages)-1]; last.Role == "assistant" {
			// Every call is answered and the model had the last word.
			return c.settle(ctx, StatusCompleted, ReasonCompleted, last.Content, "")
		}
		if c.state.Iterations >= c.cfg.MaxIterations {
			return c.settle(ctx, StatusFailed, ReasonMaxIterations, "",
				fmt.Sprintf("stopped after %d rounds (max_iterations)", c.state.Iterations))
		}
		if err := c.round(ctx); err != nil {
			var pf providerError
			if errors.As(err, &pf) {
				return c.settle(ctx, StatusFailed, ReasonProviderFailed, "", pf.Error())
			}
			return c.stopped(err)
		}
	}
}

// load reads what the holder needs beyond the claimed row.
func (c *Continuation) load(ctx context.Context) error {
	r, err := c.e.store.Resume(ctx, c.run.ID, c.stored == 0 && !c.unreadable)
	if err != nil {
		return err
	}
	c.seq = r.LastSeq
	if r.OwnerDeleted {
		// Nothing else is needed: the run is cancelled before any step.
		c.orphaned = true
		return nil
	}
	if c.unreadable {
		return nil
	}
	if c.stored == 0 {
		if c.state.Messages, err = c.e.decodeMessages(c.run.ID, r.Messages); awaitsOperator(err) {
			// Readable by a process that holds the key, or once state
			// reseal sealed it: stop, and let the lease lapse so that a
			// process that can read it recovers the run.
			return leftAsItIs(c.run.ID, err)
		} else if err != nil {
			// No holder will ever read them: settle rather than be
			// recovered again and again.
			c.e.log.Warn("transcript cannot be read", "run", c.run.ID, "err", err)
			c.unreadable = true
			return nil
		}
		c.stored = len(r.Messages)
	}
	c.standing = make(map[string]bool, len(r.Standing))
	for _, t := range r.Standing {
		c.standing[t] = true
	}
	c.interrupted = c.run.PendingEffect
	c.stamped = c.run.PendingEffect != ""
	if c.e.source != nil {
		tools, err := c.e.source.Tools(ctx, c.cfg)
		if err != nil {
			c.e.log.Warn("configuration's tools unavailable", "run", c.run.ID, "configuration", c.cfg.Identifier, "err", err)
			c.unavailable = unavailable(err)
		}
		c.extra = make(map[string]Tool, len(tools))
		for _, t := range tools {
			c.extra[t.Spec().Name] = t
		}
	}
	if c.state.Verdicts == nil {
		c.state.Verdicts = map[string]Verdict{}
	}
	return nil
}

// apply records the claimed decision as the continuation's first step.
func (c *Continuation) apply(ctx context.Context) error {
	d, pending := c.decision, c.state.Pending
	if pending == nil {
		return fmt.Errorf("runtime: run %d: decision without a pending turn", c.run.ID)
	}
	var p EventPayload
	expired := d.Path == PathExpiry
	switch d.Kind {
	case DecisionInput:
		p = InputPayload{By: d.DeciderName, Decision: d.Kind, Calls: len(pending.Calls), Expired: expired}
		call := pending.Calls[0]
		c.state.Verdicts[call.ID] = Verdict{Approved: true, By: d.DeciderName}
		c.state.Messages = append(c.state.Messages, Message{Role: "tool", ToolCallID: call.ID,
			ToolName: call.Name, Content: string(d.Input)})
	default:
		a := ApprovalPayload{By: d.DeciderName, Decision: d.Kind, Calls: len(pending.Calls), Expired: expired,
			Scope: d.Scope, Reason: d.Reason}
		approved := d.Kind == DecisionApprove
		if approved {
			edits, err := c.edit(d, pending, &a)
			if err != nil {
				return err
			}
			if d.Scope == ScopeSession {
				// The names the claim stored, named the same way from
				// the decision as stored, so that this holder's set and
				// the store's never differ (a worker's included).
				for _, n := range standingNames(pending, edits, c.tool) {
					c.standing[n] = true
				}
			}
		}
		for _, call := range pending.Calls {
			c.state.Verdicts[call.ID] = Verdict{Approved: approved, By: d.DeciderName, Reason: d.Reason}
			if !approved {
				msg := DeniedPrefix + d.DeciderName
				if d.Reason != "" {
					msg += ": " + d.Reason
				}
				if d.Path == PathExpiry {
					// Nobody decided: the pause expired, and the reason
					// says so ("no decision within 24h0m0s").
					msg = d.Reason
				}
				c.state.Messages = append(c.state.Messages, Message{Role: "tool", ToolCallID: call.ID,
					ToolName: call.Name, Content: msg, IsError: true})
			}
		}
		p = a
	}
	c.state.Pending, c.state.Applied, c.state.Said = nil, d.TurnDigest, ""
	return c.record(ctx, 0, 0, p, func(cm *Commit) { cm.Executed = d.TurnDigest })
}

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
			return c.suspend(ctx, PendingTurn{Kind: TurnApproval, Calls: c.undecided()})
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
	if o, ok := c.obs.(ToolObserver); ok {
		o.OnToolStart(call.Name)
	}
	start := time.Now()
	result, err := t.Call(ctx, Invocation{RunID: c.run.ID, OwnerID: c.run.OwnerID, CallID: call.ID, Arguments: call.Arguments})
	return c.toolResult(ctx, call, result, err, time.Since(start))
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
	var onDelta func(string)
	if d, ok := c.obs.(DeltaObserver); ok {
		onDelta = d.OnDelta
	}
	res, err := provider.Round(ctx, RoundRequest{Round: c.state.Iterations + 1, Model: c.cfg.Provider.Model,
		Messages: c.state.Messages, Tools: specs}, onDelta)
	if err != nil {
		return providerError{err}
	}
	took := time.Since(start)
	c.state.Iterations++
	c.state.Usage.InputTokens += res.Usage.InputTokens
	c.state.Usage.OutputTokens += res.Usage.OutputTokens
	c.state.Messages = append(c.state.Messages, Message{Role: "assistant", Content: res.Text, ToolCalls: res.ToolCalls})
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

// suspend pauses the run on a new turn with a new digest.
func (c *Continuation) suspend(ctx context.Context, turn PendingTurn) (Outcome, bool) {
	for _, call := range turn.Calls {
		t, ok := c.tool(call.Name)
		if !ok {
			continue
		}
		if n := standingName(t, call); n != call.Name {
			if turn.Standing == nil {
				turn.Standing = map[string]string{}
			}
			turn.Standing[call.ID] = n
		}
		if pv, ok := t.(Previewer); ok {
			if turn.Previews == nil {
				turn.Previews = map[string]string{}
			}
			line, err := pv.Preview(ctx, Invocation{RunID: c.run.ID, OwnerID: c.run.OwnerID, CallID: call.ID, Arguments: call.Arguments})
			if err != nil {
				line = "No preview: " + err.Error()
			}
			turn.Previews[call.ID] = line
		}
	}
	digest, err := Digest(turn)
	if err != nil {
		return c.stopped(err), true
	}
	c.state.Pending, c.state.Said = &turn, c.said(turn)
	status := StatusWaitingForApproval
	if turn.Kind == TurnInput {
		status = StatusWaitingForInput
	}
	p := SuspendPayload{TurnKind: turn.Kind, Calls: callPayloads(turn.Calls), Digest: digest,
		Note: turn.Note, Escalated: turn.Escalated}
	if len(turn.Previews) > 0 {
		p.Previews = Content{Value: turn.Previews}
	}
	event, timeout := EventRunWaiting, c.cfg.TurnDeadline(&turn).Timeout
	if turn.Escalated != "" {
		event = EventRunEscalated
	}
	notes, err := c.e.notifications(c.cfg, c.run.ID, notice{event: event, status: status, digest: digest, turn: &turn, timeout: timeout})
	if err != nil {
		return c.stopped(err), true
	}
	err = c.record(ctx, c.state.Iterations, 0, p, func(cm *Commit) {
		cm.Status, cm.TurnDigest = status, digest
		cm.PendingTools = strings.Join(turn.ToolNames(), ",")
		cm.DecisionTimeout = timeout
		cm.Notifications = notes
		if d := c.decision; d != nil && d.Kind == DecisionEscalate {
			cm.Executed = d.TurnDigest
		}
		c.outcome(cm, "waiting")
	})
	if errors.Is(err, ErrCancelRequested) {
		c.state.Pending = nil
		return c.cancelled(ctx), true
	}
	if err != nil {
		return c.stopped(err), true
	}
	return Outcome{Status: status, Digest: digest, Pending: &turn}, true
}

// said is the text of the model's message that made the turn's calls.
func (c *Continuation) said(turn PendingTurn) string {
	if len(turn.Calls) == 0 {
		return ""
	}
	for i := len(c.state.Messages) - 1; i >= 0; i-- {
		m := c.state.Messages[i]
		for _, tc := range m.ToolCalls {
			if tc.ID == turn.Calls[0].ID {
				return m.Content
			}
		}
	}
	return ""
}

// settle ends the run for good.
func (c *Continuation) settle(ctx context.Context, status Status, reason, answer, detail string) Outcome {
	iterations, usage := c.state.Iterations, c.state.Usage
	p := SettlePayload{Status: status, Reason: reason, Answer: Content{Value: answer},
		Iterations: &iterations, Usage: &usage, Detail: detail}
	sealed, err := c.e.sealText(answer, RunPlace("answer", c.run.ID))
	if err != nil {
		return c.stopped(err)
	}
	notes, err := c.e.notifications(c.cfg, c.run.ID, notice{event: EventRunSettled, status: status, reason: reason, answer: answer})
	if err != nil {
		return c.stopped(err)
	}
	err = c.record(ctx, c.state.Iterations, 0, p, func(cm *Commit) {
		cm.Status, cm.TerminationReason, cm.Answer = status, reason, sealed
		cm.Notifications = notes
		c.outcome(cm, string(status))
	})
	if err != nil {
		return c.stopped(err)
	}
	return Outcome{Status: status, Reason: reason, Answer: answer, Detail: detail}
}

// cancelled honours a cancel request at a step boundary.
func (c *Continuation) cancelled(ctx context.Context) Outcome {
	reason, err := c.cancelReason(ctx)
	if err != nil {
		return c.stopped(err)
	}
	p := CancelPayload{Requested: true, OwnerDeleted: reason == ReasonOwnerDeleted}
	if err := c.record(ctx, c.state.Iterations, 0, p, nil); err != nil {
		return c.stopped(err)
	}
	return c.settle(ctx, StatusCancelled, reason, "", "")
}

// handBack returns the run to the workers at a step boundary: decided when
// it ever had a decision, else queued. No event is recorded: nothing
// happened to the run itself.
func (c *Continuation) handBack(ctx context.Context) Outcome {
	status := StatusQueued
	if c.run.TurnDigest != "" || c.decision != nil {
		status = StatusDecided
	}
	if err := c.record(ctx, 0, 0, nil, func(cm *Commit) { cm.Status = status }); err != nil {
		return c.stopped(err)
	}
	return Outcome{Status: status}
}

// outcome notes on the decision's row how its continuation ended.
func (c *Continuation) outcome(cm *Commit, outcome string) {
	// A continuation resumed after its decision was applied (a worker that
	// recovered it, or took it over from a draining server) finishes the
	// turn the run was claimed on: that turn's decision gets the outcome.
	digest := c.run.TurnDigest
	if c.decision != nil {
		digest = c.decision.TurnDigest
	}
	if digest != "" {
		cm.Outcome, cm.OutcomeDigest = outcome, digest
	}
}

// stopped ends a continuation that may not go on; the run stays running
// until its lease expires and a worker recovers it.
func (c *Continuation) stopped(err error) Outcome {
	return Outcome{Status: StatusRunning, Err: err}
}

// record commits one step: its event (of p's kind), the checkpointed
// state and the lease, in one transaction, then tells the metrics and the
// observer. took is how long the step ran before its commit. A nil p
// records no event: the commit only moves the run.
func (c *Continuation) record(ctx context.Context, round int, took time.Duration, p EventPayload, edit func(*Commit)) error {
	start := time.Now()
	var kind EventKind
	if p != nil {
		kind = p.Kind()
	}
	var plain, blob []byte // blob stays nil when the state is unreadable or unchanged
	var added [][]byte
	first := c.stored
	if c.rewrite >= 0 && c.rewrite < first {
		first = c.rewrite
	}
	if !c.unreadable {
		var err error
		if plain, err = json.Marshal(c.state); err != nil {
			return fmt.Errorf("runtime: encode state: %w", err)
		}
		if !bytes.Equal(plain, c.checkpoint) {
			if blob, err = c.e.sealer.Seal(plain, RunPlace("state", c.run.ID)); err != nil {
				return err
			}
		}
		if added, err = c.e.encodeMessages(c.run.ID, first, c.state.Messages[first:]); err != nil {
			return err
		}
	}
	ev := Event{RunID: c.run.ID, Kind: kind, Round: round, DurationMS: took.Milliseconds()}
	stored := ev
	if kind != "" {
		ev.Seq, ev.Payload = c.seq+1, filter(c.cfg.PrivacyLevel, p)
		stored.Seq = ev.Seq
		var err error
		if stored.Payload, err = c.e.sealJSON(ev.Payload, EventPlace(c.run.ID, ev.Seq)); err != nil {
			return err
		}
	}
	cm := Commit{RunID: c.run.ID, ClaimedBy: c.run.ClaimedBy, Event: stored, State: blob,
		Messages: added, FirstMessage: first, Rewrite: first < c.stored, Lease: c.e.lease,
		Iterations: c.state.Iterations, Usage: c.state.Usage, Status: StatusRunning, Stamped: c.stamped}
	if edit != nil {
		edit(&cm)
	}
	cancel, err := c.e.store.Commit(ctx, cm)
	c.cancel = c.cancel || cancel
	if err != nil {
		return err
	}
	c.stored, c.checkpoint, c.rewrite, c.stamped = len(c.state.Messages), plain, -1, cm.PendingEffect != ""
	if kind == "" {
		return nil
	}
	ev.CreatedAt = time.Now()
	commit := ev.CreatedAt.Sub(start)
	c.e.metrics.StepRecorded(kind, took+commit, commit)
	c.seq++
	c.steps++
	step := Step{Event: ev}
	if c.cfg.PrivacyLevel == PrivacyFull {
		step.Full = ev.Payload
	} else {
		step.Full = filter(PrivacyFull, p)
	}
	c.e.feed.publish(c, ev, cm.Status)
	c.obs.OnStep(step)
	return nil
}
