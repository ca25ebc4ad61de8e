package runtime

import (
	"context"
	"errors"
	"time"
)

// CodeNotSettled refuses to erase a run that has not settled: a turn of it
// runs or waits, and its holder (or the person deciding it) would write
// content again after the erase. Nothing was written.
const CodeNotSettled Code = "not_settled"

// EraseStore is what Erase needs of the store.
type EraseStore interface {
	// EraseRun removes every copy of a settled run's content and stamps
	// the run erased by a user, in one transaction (see Erasure). It
	// returns when the run was erased; ErrClaimLost, with nothing
	// written, when the run is not settled or already erased by then.
	EraseRun(ctx context.Context, e Erasure) (time.Time, error)
}

// Erasure is the erase of one run's content.
type Erasure struct {
	RunID int64
	// By is the user who erased it, kept on the run's row.
	By int64
}

// Erased says what an erase did.
type Erased struct {
	RunID    int64
	ErasedAt time.Time
}

// eraseTries bounds how often Erase reads a run again when it moved
// between its read and the erase's transaction.
const eraseTries = 3

// Erase removes every copy of a settled run's content (its prompt,
// answer, state, transcript, event payloads, the reasons, inputs and
// edited arguments of its decisions, the bodies of its notifications) in
// one transaction, and keeps the audit: the run's row, with when and by
// whom it was erased, its events' kinds and times, and its decisions (who
// decided what, when). From then on the run answers everywhere as one
// that does not exist, but for the history, which lists it as erased.
// Only the owner and admins may erase a run. Refusals: not_found for a
// run that does not exist, is erased already, or that the actor may not
// read; not_settled for one whose turn runs or waits (cancel it first, or
// let it settle).
func (e *Engine) Erase(ctx context.Context, runID int64, actor Actor) (Erased, error) {
	for range eraseTries {
		run, err := e.store.Run(ctx, runID)
		if errors.Is(err, ErrNotFound) || (err == nil && !actor.MayRead(run.OwnerID)) {
			// To anyone but the owner and admins the run does not exist,
			// erased or not.
			return Erased{}, refuse(CodeNotFound, "no run %d", runID)
		}
		if err != nil {
			return Erased{}, err
		}
		if !run.Status.Terminal() {
			return Erased{}, refuse(CodeNotSettled, "run %d is %s: only a settled run can be erased; cancel it first",
				runID, statusWords(run.Status))
		}
		at, err := e.store.EraseRun(ctx, Erasure{RunID: runID, By: actor.ID})
		if err == nil {
			e.log.Info("run erased", "run", runID, "by", actor.ID)
			return Erased{RunID: runID, ErasedAt: at}, nil
		}
		if !errors.Is(err, ErrClaimLost) {
			return Erased{}, err
		}
		// It was erased meanwhile, or a new turn of it started: look
		// again, and answer as that says.
	}
	return Erased{}, refuse(CodeAlreadyResuming, "run %d keeps changing; try again", runID)
}

// statusWords is a status as a refusal's message says it.
func statusWords(s Status) string {
	switch s {
	case StatusWaitingForApproval:
		return "waiting for approval"
	case StatusWaitingForInput:
		return "waiting for input"
	}
	return string(s)
}
