package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
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
	// halted ends when the run was cancelled while this continuation held
	// it (halt); calls, Run's context cancelled with it, is the context of
	// the model's rounds and the tool calls, so that a cancel stops the
	// call in flight rather than waiting for its end.
	halted context.Context
	halt   context.CancelFunc
	calls  context.Context
	cred   atomic.Pointer[RunCredential] // sent to the forwarding MCP servers; see identity.go
	// rewrite is the index of the first stored transcript message the
	// next commit writes again (an edited call's message), or -1.
	rewrite int
	// durable: a worker runs it (the path its rule decisions record);
	// matches and owner are what the rules said and read (see match).
	durable bool
	matches map[string]RuleMatch
	owner   *RuleOwner
}

func (e *Engine) continuation(run *Run, cfg *Configuration, state State, d *DecisionRecord) *Continuation {
	halted, halt := context.WithCancel(context.Background())
	return &Continuation{e: e, run: run, cfg: cfg, state: state, decision: d, rewrite: -1, halted: halted, halt: halt}
}

// RunID is the id of the claimed run.
func (c *Continuation) RunID() int64 { return c.run.ID }

// Turn is the conversation's turn the continuation carries on.
func (c *Continuation) Turn() int { return c.run.ConversationTurn }

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
	calls, stopCalls := context.WithCancel(ctx)
	defer stopCalls()
	defer context.AfterFunc(c.halted, stopCalls)()
	c.calls = calls
	// Released even if a step panics (net/http recovers a handler's panic
	// and serves on): a lease renewed for a dead continuation would keep
	// its run from every worker.
	c.e.leases.hold(c)
	defer c.e.leases.release(c)
	defer c.e.feed.release(c)
	defer c.endCredential()
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
		if c.cancel || c.halted.Err() != nil {
			// halted only ever follows a cancel request that the store
			// has: cancelled reads its reason from there.
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
		if c.state.Iterations-c.state.FirstRound >= c.cfg.MaxIterations {
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
		tools, err := c.e.source.Tools(c.startCredential(ctx), c.cfg)
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
		choices, err := d.CallVerdicts()
		if err != nil {
			return err
		}
		approves := func(id string) bool { ok, _ := verdictOf(d, choices, id); return ok }
		if d.Kind == DecisionApprove || d.Kind == DecisionMixed {
			edits, err := c.edit(d, pending, &a)
			if err != nil {
				return err
			}
			if d.Scope == ScopeSession {
				// The names the claim stored, named the same way from
				// the decision as stored, so that this holder's set and
				// the store's never differ (a worker's included).
				for _, n := range standingNames(approvedTurn(pending, approves), edits, c.tool) {
					c.standing[n] = true
				}
			}
		}
		for _, call := range pending.Calls {
			approved, reason := verdictOf(d, choices, call.ID)
			c.state.Verdicts[call.ID] = Verdict{Approved: approved, By: d.DeciderName, Reason: reason}
			if choices != nil {
				a.PerCall = append(a.PerCall, CallVerdictPayload{CallID: call.ID, Tool: call.Name,
					Decision: verdictKind(approved), Reason: choices[call.ID].Reason})
			}
			if !approved {
				msg := DeniedPrefix + d.DeciderName
				if reason != "" {
					msg += ": " + reason
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
