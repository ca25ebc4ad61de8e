package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// unsettled are the statuses of a run that has not settled: what deleting
// its owner has to cancel.
var unsettled = []Status{StatusQueued, StatusRunning, StatusWaitingForApproval, StatusWaitingForInput, StatusDecided}

// UnsettledStatuses returns the statuses of a run that has not settled,
// in a fixed order.
func UnsettledStatuses() []Status { return slices.Clone(unsettled) }

// OwnedRun is one unsettled run of a user being deleted, as the deletion
// read it, with what cancelling it writes.
type OwnedRun struct {
	ID     int64
	Status Status
	// Events and Notifications are an idle run's cancel: its cancel and
	// settle events (sealed) and its run.settled notifications. A running
	// run has none: its holder cancels it at its next step boundary and
	// writes them then, so that it settles once.
	Events        []Event
	Notifications []Delivery
}

// UserDeletion is the deletion of a user as one transaction: their API
// tokens go, each of Runs is cancelled (or, running, flagged for its
// holder to cancel), and the user's row goes last.
type UserDeletion struct {
	UserID int64
	// Runs are every unsettled run the user owns, by id, as read before
	// the transaction; the store refuses the deletion (ErrClaimLost) when
	// the runs it finds under its locks are not these in these statuses.
	Runs []OwnedRun
}

// DeletedUser says what deleting a user did.
type DeletedUser struct {
	// Tokens counts the API tokens deleted.
	Tokens int
	// Cancelled counts the runs settled as cancelled at once (queued,
	// waiting, decided); Stopping the running ones, which their holders
	// cancel at their next step boundary.
	Cancelled, Stopping int
}

// deleteTries bounds how often DeleteUser reads the user's runs again
// when one moved between its read and its transaction.
const deleteTries = 5

// DeleteUser deletes a user in one transaction with their API tokens, and
// cancels every run of theirs that has not settled, as owner_deleted: at
// once when nobody holds it (with its events and its run.settled
// notifications, as a cancel writes them), at its holder's next step
// boundary when it runs. From then on nobody may decide those runs and no
// tool acts as that user. Errors: one wrapping ErrNotFound for a user that
// does not exist, with nothing written; a refusal already_resuming when
// the user's runs keep changing under it.
func (e *Engine) DeleteUser(ctx context.Context, userID int64) (DeletedUser, error) {
	for range deleteTries {
		runs, err := e.store.UnsettledRuns(ctx, userID)
		if err != nil {
			return DeletedUser{}, err
		}
		d := UserDeletion{UserID: userID, Runs: make([]OwnedRun, len(runs))}
		var out DeletedUser
		for i, run := range runs {
			d.Runs[i] = OwnedRun{ID: run.ID, Status: run.Status}
			if run.Status == StatusRunning {
				out.Stopping++
				continue
			}
			out.Cancelled++
			// The events take the run's next seqs, which their sealed
			// payloads are bound to; the store refuses them
			// (ErrClaimLost) when the run moved on meanwhile.
			last, err := e.store.LastSeq(ctx, run.ID)
			if err != nil {
				return DeletedUser{}, err
			}
			if d.Runs[i].Events, err = e.sealEvents(run, ownerDeletedEvents(run.Status, run.ConversationTurn, last)); err != nil {
				return DeletedUser{}, err
			}
			if d.Runs[i].Notifications, err = e.settledNotifications(ctx, run, ReasonOwnerDeleted); err != nil {
				return DeletedUser{}, err
			}
		}
		out.Tokens, err = e.store.DeleteUser(ctx, d)
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, ErrClaimLost) {
			return DeletedUser{}, err
		}
		// A run of theirs moved (or a new one came) between the read and
		// the transaction, which wrote nothing: read them again.
	}
	return DeletedUser{}, refuse(CodeAlreadyResuming, "the runs of user %d keep changing; try again", userID)
}

// ownerDeletedEvents are the events of an idle run cancelled because its
// owner was deleted, after the event last. Neither carries content.
func ownerDeletedEvents(from Status, turn, last int) []Event {
	by := filter(PrivacyMetadata, CancelPayload{OwnerDeleted: true, From: from})
	settle := filter(PrivacyMetadata, SettlePayload{Status: StatusCancelled, Reason: ReasonOwnerDeleted})
	return []Event{{Seq: last + 1, Kind: KindCancel, Payload: by}, turnEnded(last+2, turn, ReasonOwnerDeleted),
		{Seq: last + 3, Kind: KindSettle, Payload: settle}}
}

// ownerGone settles a run whose owner no longer exists, before any step:
// a run that escaped its owner's deletion (one created at that very
// moment) is never continued as a user who does not exist.
func (c *Continuation) ownerGone(ctx context.Context) Outcome {
	c.e.log.Warn("run of a deleted user cancelled", "run", c.run.ID, "owner", c.run.OwnerID)
	if err := c.record(ctx, c.state.Iterations, 0, CancelPayload{OwnerDeleted: true}, nil); err != nil {
		return c.stopped(err)
	}
	return c.settle(ctx, StatusCancelled, ReasonOwnerDeleted, "", "")
}

// cancelReason is the termination reason of a cancel this continuation
// honours: owner_deleted when the owner is gone (deleting a user flags
// their running runs), else cancelled.
func (c *Continuation) cancelReason(ctx context.Context) (string, error) {
	gone, err := c.e.store.OwnerDeleted(ctx, c.run.ID)
	if err != nil {
		return "", fmt.Errorf("runtime: run %d: owner: %w", c.run.ID, err)
	}
	if gone {
		return ReasonOwnerDeleted, nil
	}
	return ReasonCancelled, nil
}
