package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// How a continuation ends a step or itself: every step is recorded in one
// commit (record), and a continuation ends by pausing on a new turn
// (suspend), settling, honouring a cancel, or handing its run back.

// suspend pauses the run on a new turn with a new digest.
func (c *Continuation) suspend(ctx context.Context, turn PendingTurn) (Outcome, bool) {
	if c.run.ConversationTurn > 1 {
		// The same calls asked again in a later turn (a model that reuses
		// its call ids) are a new question: a decision of the turn before
		// must not claim it.
		turn.ConversationTurn = c.run.ConversationTurn
	}
	c.rulesAsk(ctx, &turn)
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
	c.votesAsk(&turn)
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
		cm.ApprovalsRequired = turn.ApprovalsRequired
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
	}, TurnEndedPayload{Turn: c.run.ConversationTurn, Status: status, Reason: reason})
	if err != nil {
		return c.stopped(err)
	}
	if status == StatusCompleted && c.run.ConversationTurn == 1 && c.cfg.Title == TitleGenerate && c.provider != nil {
		// Once: only the continuation that settles turn 1 asks, and no
		// stream waits for the answer.
		if prompt := firstUserMessage(c.state.Messages); prompt != "" {
			go c.generateTitle(prompt)
		}
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
// records no event: the commit only moves the run. The events of before
// precede p's in the same commit (a settle's turn_ended); they are not
// steps of their own, and only the run's followers are told of them.
func (c *Continuation) record(ctx context.Context, round int, took time.Duration, p EventPayload, edit func(*Commit), before ...EventPayload) error {
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
	ahead := make([]Event, len(before))
	for i, bp := range before {
		ahead[i] = Event{RunID: c.run.ID, Seq: c.seq + 1 + i, Turn: c.run.ConversationTurn, Kind: bp.Kind(), Round: round,
			Payload: filter(c.cfg.PrivacyLevel, bp)}
	}
	sealedAhead, err := c.e.sealEvents(c.run, ahead)
	if err != nil {
		return err
	}
	ev := Event{RunID: c.run.ID, Turn: c.run.ConversationTurn, Kind: kind, Round: round, DurationMS: took.Milliseconds()}
	stored := ev
	if kind != "" {
		ev.Seq, ev.Payload = c.seq+1+len(ahead), filter(c.cfg.PrivacyLevel, p)
		stored.Seq = ev.Seq
		var err error
		if stored.Payload, err = c.e.sealJSON(ev.Payload, EventPlace(c.run.ID, ev.Seq)); err != nil {
			return err
		}
	}
	cm := Commit{RunID: c.run.ID, ClaimedBy: c.run.ClaimedBy, Event: stored, State: blob,
		Ahead: sealedAhead, Messages: added, FirstMessage: first, Turn: c.run.ConversationTurn, Rewrite: first < c.stored, Lease: c.e.lease,
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
	for _, a := range ahead {
		a.CreatedAt = ev.CreatedAt
		c.seq++
		c.e.feed.publish(c, a, StatusRunning)
	}
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
