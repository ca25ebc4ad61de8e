package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A claim that did not go through is explained, never guessed at: the run
// is read again (through the pool that waits for a cluster) and the loser
// told stale_turn, already_resuming or not_waiting. A decider who lost to
// someone else (a second tab, a double click, a colleague a second late)
// hears who decided the turn, how and when, and how the run stands: the
// summary rides on the already_resuming refusal, and goes only to who
// passed MayDecide; the reason only to who may read the run.

// claimFailed explains a claim that did not go through: a lost one as the
// refusal it was classified as.
func (p *pipeline) claimFailed(ctx context.Context, err error) error {
	if errors.Is(err, ErrClaimLost) {
		err = p.lost(ctx)
		if code := CodeOf(err); code != "" {
			p.e.metrics.ClaimLost(code)
		}
	}
	return err
}

// DecisionSummary is the decision that won a turn, as a decider who lost
// it may see it.
type DecisionSummary struct {
	// By is the decider's name; "" for a decision by nobody (a deadline).
	By    string
	Kind  string // approve, deny or input
	Scope string
	// DecidedAt is when the claim was won, by the database's clock: every
	// event of the winning continuation is recorded at or after it.
	DecidedAt time.Time
	// Status is the run's status when the loser was refused, and Turn the
	// conversation's turn the decision continues.
	Status Status
	Turn   int
	// MayRead says whether the loser may read the run: only then is the
	// reason set, and a follower shown the steps' stored content.
	MayRead bool
	// Reason is the winner's reason, only for a loser who may read the run
	// (never the input: that is content of the run).
	Reason string
}

// alreadyDecided is the already_resuming refusal of a turn someone else
// decided, carrying the decision d (looked up when nil) when it is found.
// Errors are the store's.
func (p *pipeline) alreadyDecided(ctx context.Context, run *Run, d *DecisionRecord, format string) error {
	ref := refuse(CodeAlreadyResuming, format, run.ID)
	if p.digest == "" {
		return ref
	}
	if d == nil {
		var err error
		d, err = p.e.store.Decision(ctx, run.ID, p.digest)
		if errors.Is(err, ErrNotFound) {
			return ref
		}
		if err != nil {
			return fmt.Errorf("runtime: explain lost claim of run %d: %w", run.ID, err)
		}
	}
	sum := &DecisionSummary{By: d.DeciderName, Kind: d.Kind, Scope: d.Scope, DecidedAt: d.DecidedAt, Status: run.Status,
		Turn: run.ConversationTurn}
	if sum.MayRead = p.actor.MayRead(run.OwnerID); sum.MayRead {
		if reason, err := p.e.openText(d.Reason, DecisionPlace("reason", d.RunID, d.TurnDigest)); err == nil {
			sum.Reason = reason
		}
	}
	ref.Decided = sum
	return ref
}

// lost classifies a claim someone else won, as the winner left the run:
// on a cluster the winner may have committed on another node.
func (p *pipeline) lost(ctx context.Context) error {
	run, err := p.e.store.RunSynced(ctx, p.runID)
	if err != nil {
		return fmt.Errorf("runtime: classify lost claim of run %d: %w", p.runID, err)
	}
	if run.Status == p.waitFor && run.TurnDigest != p.digest {
		return &Refusal{Code: CodeStaleTurn, Digest: run.TurnDigest,
			Message: "the pending action changed; review it again"}
	}
	return p.notWaiting(ctx, run)
}

// notWaiting explains why a run that does not wait for this decision
// cannot take it. A turn someone already decided is already_resuming
// however far its continuation got, so a double click never reads as an
// error about the run.
func (p *pipeline) notWaiting(ctx context.Context, run *Run) error {
	switch run.Status {
	case StatusRunning, StatusDecided, StatusQueued:
		return p.alreadyDecided(ctx, run, nil, "run %d is already being resumed")
	}
	if p.digest != "" {
		d, err := p.e.store.Decision(ctx, run.ID, p.digest)
		if err == nil {
			return p.alreadyDecided(ctx, run, d, "this turn of run %d was already decided")
		}
		if !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	if run.Status.Terminal() {
		return refuse(CodeNotWaiting, "run %d is already %s", run.ID, run.Status)
	}
	return refuse(CodeNotWaiting, "run %d is %s, not %s", run.ID, run.Status, p.waitFor)
}
