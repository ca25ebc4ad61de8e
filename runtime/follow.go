package runtime

import (
	"context"
	"errors"
	"time"
)

// A streamed decider who lost a claim (a second tab, a double click, a
// colleague a second late) may follow the winning continuation to its end:
// its steps as they are recorded, then its outcome. Only who passed
// MayDecide follows; a step's stored content goes only to who may read the
// run.

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
