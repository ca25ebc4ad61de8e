package runtime

import (
	"context"
	"errors"
)

// CancelResult says what a cancel did.
type CancelResult struct {
	// Status is cancelled when the run was idle, or running when its
	// holder stops it: at once when it is inside a model or tool call
	// (within about a second on another process), else at its next step
	// boundary.
	Status Status
}

// Cancel cancels a run from any non-terminal state: at once when nobody
// holds it; when it runs, its holder stops the call in flight and settles
// it. Only the owner and admins may cancel. Refusals: not_found (also for anyone else),
// not_waiting (already settled).
func (e *Engine) Cancel(ctx context.Context, runID int64, actor Actor) (CancelResult, error) {
	for attempt := 0; attempt < 5; attempt++ {
		run, err := e.store.Run(ctx, runID)
		if errors.Is(err, ErrNotFound) {
			return CancelResult{}, refuse(CodeNotFound, "no run %d", runID)
		}
		if err != nil {
			return CancelResult{}, err
		}
		if !actor.MayRead(run.OwnerID) {
			// Only they may cancel: to anyone else the run does not
			// exist, whatever its state.
			return CancelResult{}, refuse(CodeNotFound, "no run %d", runID)
		}
		if run.Status.Terminal() {
			return CancelResult{}, refuse(CodeNotWaiting, "run %d is already %s", runID, run.Status)
		}
		if run.Status == StatusRunning {
			err = e.store.RequestCancel(ctx, runID)
			if err == nil {
				// Held here: its call in flight stops now. Held by another
				// process: that one's lease keeper sees the flag within
				// cancelPoll.
				e.leases.halt(runID)
				return CancelResult{Status: StatusRunning}, nil
			}
		} else {
			// The events take the next seqs, which their sealed payloads
			// are bound to; CancelIdle refuses them (ErrClaimLost) when
			// the run moved on meanwhile.
			var last int
			if last, err = e.store.LastSeq(ctx, runID); err != nil {
				return CancelResult{}, err
			}
			var events []Event
			if events, err = e.sealEvents(run, cancelEvents(actor, run.Status, run.ConversationTurn, last)); err != nil {
				return CancelResult{}, err
			}
			var notes []Delivery
			if notes, err = e.settledNotifications(ctx, run, ReasonCancelled); err != nil {
				return CancelResult{}, err
			}
			err = e.store.CancelIdle(ctx, runID, run.Status, events, notes)
			if err == nil {
				return CancelResult{Status: StatusCancelled}, nil
			}
		}
		if !errors.Is(err, ErrClaimLost) {
			return CancelResult{}, err
		}
		// The run moved between the read and the guarded update: look again.
	}
	return CancelResult{}, refuse(CodeAlreadyResuming, "run %d keeps changing; try again", runID)
}

// turnEnded is the turn_ended event, at seq, of a turn cancelled while
// nobody held its run.
func turnEnded(seq, turn int, reason string) Event {
	p := filter(PrivacyMetadata, TurnEndedPayload{Turn: turn, Status: StatusCancelled, Reason: reason})
	return Event{Seq: seq, Kind: KindTurnEnded, Payload: p}
}

// cancelEvents are the events of a cancel, after the event last: who
// asked, and the settle. Neither carries content, so they need no privacy
// filter.
func cancelEvents(actor Actor, from Status, turn, last int) []Event {
	by := filter(PrivacyMetadata, CancelPayload{By: &actor.Name, From: from})
	settle := filter(PrivacyMetadata, SettlePayload{Status: StatusCancelled, Reason: ReasonCancelled})
	return []Event{{Seq: last + 1, Kind: KindCancel, Payload: by}, turnEnded(last+2, turn, ReasonCancelled),
		{Seq: last + 3, Kind: KindSettle, Payload: settle}}
}
