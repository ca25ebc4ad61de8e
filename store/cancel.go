package store

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
)

// RequestCancel flags a running run; its holder cancels it at the next step
// boundary.
func (s *Store) RequestCancel(ctx context.Context, runID int64) error {
	res, err := s.db.ExecContext(ctx, `
		UPDATE runs SET cancel_requested = 1, updated_at = NOW(6)
		WHERE id = ? AND status = 'running'`, runID)
	if err := oneRow(res, err, runtime.ErrClaimLost); err != nil {
		return fmt.Errorf("store: request cancel of run %d: %w", runID, err)
	}
	return nil
}

// CancelIdle cancels a run that nobody holds and appends its events, which
// carry the next seqs (their sealed payloads are bound to them): the
// status guard locks the row, so no holder can append in between, and a
// run that moved on since the caller read its last seq (decided, run, and
// waiting again) is runtime.ErrClaimLost, for the caller to look again.
// Its notifications (run.settled) are written in the same transaction.
func (s *Store) CancelIdle(ctx context.Context, runID int64, from runtime.Status, events []runtime.Event, notes []runtime.Delivery) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	defer tx.Rollback()
	if err := cancelIdle(ctx, tx, runID, from, runtime.ReasonCancelled, events, notes); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	return nil
}

// cancelIdle is CancelIdle inside a transaction of the caller's, settling
// the run with a termination reason of the caller's: a person's cancel, or
// the deletion of its owner. runtime.ErrClaimLost when the run is no
// longer in status from.
func cancelIdle(ctx context.Context, tx sqlx.ExtContext, runID int64, from runtime.Status, reason string, events []runtime.Event, notes []runtime.Delivery) error {
	res, err := tx.ExecContext(ctx, `
		UPDATE runs SET status = 'cancelled', termination_reason = ?, claimed_by = NULL,
			lease_expires_at = NULL, turn_digest = NULL, waiting_since = NULL, decision_deadline = NULL,
			updated_at = NOW(6)
		WHERE id = ? AND status = ?`, reason, runID, from)
	if err := oneRow(res, err, runtime.ErrClaimLost); err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	var seq int
	if err := sqlx.GetContext(ctx, tx, &seq, `SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = ?`, runID); err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	for _, e := range events {
		if seq++; e.Seq != seq {
			return fmt.Errorf("store: cancel run %d: event %d is not the next (%d): %w", runID, e.Seq, seq, runtime.ErrClaimLost)
		}
		if err := insertEvent(ctx, tx, runID, e); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `
		UPDATE decisions SET outcome = 'cancelled' WHERE run_id = ? AND outcome IS NULL`, runID); err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	if err := insertDeliveries(ctx, tx, notes); err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	if err := insertChanges(ctx, tx, runChange{runID: runID, change: runtime.ChangeSettled, status: runtime.StatusCancelled}); err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	return nil
}
