package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// expiryBatch is how many expired pauses one sweep looks at: enough that a
// run this worker cannot settle (its configuration is gone, or its state
// is sealed under a key it lacks) does not hide the ones behind it.
const expiryBatch = 8

// claimExpiredPause claims, for a worker, the longest-expired pause it can
// settle, and returns the continuation that carries the expiry out;
// ErrNotFound when none is due. Each pause is claimed through the very
// claim a person's decision takes (guarded by status and turn digest, the
// decisions table's unique key behind it): when a person races the
// deadline exactly one of them records the turn's decision.
func (e *Engine) claimExpiredPause(ctx context.Context, holder string) (*Continuation, error) {
	ids, err := e.store.ExpiredPauses(ctx, expiryBatch)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		c, err := e.expire(ctx, id, holder)
		if errors.Is(err, ErrClaimLost) || errors.Is(err, ErrNotFound) {
			continue // a person, a cancel or another worker came first
		}
		if err != nil {
			e.log.Warn("expired pause left waiting", "run", id, "err", err)
			continue
		}
		return c, nil
	}
	return nil, ErrNotFound
}

// expire records the decision by nobody that settles one expired pause:
// a denial, or (once, when the turn's deadline says escalate) the
// escalation that re-offers the turn to the escalation grant's holders.
// The worker holds the run afterwards, as after any claim it wins.
// ErrClaimLost when the run no longer waits on the turn that expired.
func (e *Engine) expire(ctx context.Context, id int64, holder string) (*Continuation, error) {
	run, cfg, err := e.store.RunForDecision(ctx, id)
	if err != nil {
		return nil, err
	}
	if !run.Status.Waiting() || run.DecisionDeadline == nil || run.TurnDigest == "" {
		return nil, fmt.Errorf("runtime: expire run %d: %w", id, ErrClaimLost)
	}
	if cfg == nil {
		return nil, fmt.Errorf("runtime: expire run %d: its configuration is gone", id)
	}
	state, err := e.decodeState(run.ID, run.State)
	if err != nil {
		return nil, fmt.Errorf("runtime: expire run %d: %w", id, err)
	}
	if state.Pending == nil {
		return nil, fmt.Errorf("runtime: expire run %d: no pending turn in its state", id)
	}
	td := cfg.TurnDeadline(state.Pending)
	// The timeout the run waited is the one its row was given, even if
	// the configuration changed since: both times are from one NOW(6).
	timeout := td.Timeout
	if run.WaitingSince != nil {
		timeout = run.DecisionDeadline.Sub(*run.WaitingSince)
	}
	action, kind, reason := OnTimeoutDeny, DecisionDeny, ExpiryReason(timeout)
	if td.OnTimeout == OnTimeoutEscalate && td.EscalateGrant != "" && state.Pending.Escalated == "" {
		action, kind = OnTimeoutEscalate, DecisionEscalate
		reason += fmt.Sprintf("; escalated to holders of the %q grant", td.EscalateGrant)
	}
	d := DecisionRecord{RunID: id, TurnDigest: run.TurnDigest, Kind: kind, Scope: ScopeOnce, Reason: reason,
		Tools: strings.Join(state.Pending.ToolNames(), ","), Path: PathExpiry}
	stored, err := e.sealDecision(d)
	if err != nil {
		return nil, err
	}
	notes, err := e.notifications(cfg, id, notice{event: EventRunExpired, status: StatusRunning, digest: run.TurnDigest,
		turn: state.Pending, action: action})
	if err != nil {
		return nil, err
	}
	err = e.store.Claim(ctx, Claim{RunID: id, From: run.Status, Digest: run.TurnDigest, To: StatusRunning,
		ClaimedBy: holder, Lease: e.lease, Decision: stored, Notifications: notes})
	if err != nil {
		return nil, err
	}
	e.metrics.DecisionExpired(action)
	run.Status, run.ClaimedBy, run.DecisionDeadline = StatusRunning, holder, nil
	return e.continuation(run, cfg, state, &d), nil
}

// escalate carries out an escalation: the same calls, offered again as a
// new turn that only holders of grant may decide, with a fresh deadline.
// Its digest differs from the expired turn's (the grant is part of it), so
// the forms rendered before are stale.
func (c *Continuation) escalate(ctx context.Context, grant string) Outcome {
	turn := *c.state.Pending
	turn.Escalated, turn.Previews = grant, nil
	c.state.Applied = c.decision.TurnDigest
	out, _ := c.suspend(ctx, turn)
	return out
}
