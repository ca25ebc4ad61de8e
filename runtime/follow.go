package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A decider who loses a claim (a second tab, a double click, a colleague a
// second late) is told what happened instead of only "already being
// resumed": who decided the turn, how and when, and how the run stands
// (the summary rides on the already_resuming refusal), and a streamed loser
// may follow the winning continuation to its end (Follow). Both are told
// only to who passed MayDecide; the reason only to who may read the run.

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
	// Status is the run's status when the loser was refused.
	Status Status
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
	sum := &DecisionSummary{By: d.DeciderName, Kind: d.Kind, Scope: d.Scope, DecidedAt: d.DecidedAt, Status: run.Status}
	if sum.MayRead = p.actor.MayRead(run.OwnerID); sum.MayRead {
		if reason, err := p.e.openText(d.Reason, DecisionPlace("reason", d.RunID, d.TurnDigest)); err == nil {
			sum.Reason = reason
		}
	}
	ref.Decided = sum
	return ref
}

// Followed is what one look at a decided run gives its follower: the
// events recorded since the decision after the seq asked for, and, once
// the run no longer moves on its own (it waits again or is settled), how
// it ended.
type Followed struct {
	Events []Event
	// Last is the highest seq read, of an event shown or of an older one:
	// the afterSeq of the next look.
	Last int
	// Outcome is nil while the run is still live (running, decided, queued).
	// Answer is set only for a follower who may read the run.
	Outcome *Outcome
}

// Follow looks once at a run that someone else's decision resumed at
// since: the events recorded at or after since with a seq above afterSeq,
// and the outcome once the run waits or is settled. The status is read
// before the events, so when it reports an outcome the events up to it are
// all there. A follower who may not decide the run is told not_found, as
// for a run that does not exist; other errors are the store's. It runs
// nothing: a follower that stops changes nothing about the run.
func (e *Engine) Follow(ctx context.Context, runID int64, actor Actor, since time.Time, afterSeq int) (Followed, error) {
	run, err := e.store.Run(ctx, runID)
	if errors.Is(err, ErrNotFound) || (err == nil && !actor.MayDecide(run.OwnerID)) {
		return Followed{}, refuse(CodeNotFound, "no run %d", runID)
	}
	if err != nil {
		return Followed{}, err
	}
	evs, err := e.Events(ctx, runID, afterSeq)
	if err != nil {
		return Followed{}, err
	}
	f := Followed{Last: afterSeq}
	for _, ev := range evs {
		f.Last = ev.Seq
		if !ev.CreatedAt.Before(since) {
			f.Events = append(f.Events, ev)
		}
	}
	switch {
	case run.Status == StatusRunning || run.Status == StatusDecided || run.Status == StatusQueued:
		return f, nil
	}
	out := Outcome{RunID: run.ID, Status: run.Status, Reason: run.TerminationReason, Iterations: run.Iterations,
		Usage: Usage{InputTokens: run.InputTokens, OutputTokens: run.OutputTokens}}
	if actor.MayRead(run.OwnerID) {
		out.Answer = e.readable(run).Answer
	}
	if run.Status.Waiting() {
		out.Digest = run.TurnDigest
		state, err := e.decodeState(run.ID, run.State)
		if err != nil || state.Pending == nil {
			// The next decision refuses it as unreadable_state; the
			// follower is told the run waits, on a turn it cannot show.
			out.Pending = &PendingTurn{}
		} else {
			out.Pending = state.Pending
		}
	}
	f.Outcome = &out
	return f, nil
}
