package store

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
)

// LastSeq returns the highest event seq of a run, 0 when it has none.
func (s *Store) LastSeq(ctx context.Context, runID int64) (int, error) {
	var seq int
	err := s.db.GetContext(ctx, &seq, `SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = ?`, runID)
	if err != nil {
		return 0, fmt.Errorf("store: last seq of run %d: %w", runID, err)
	}
	return seq, nil
}

// Events returns a run's events after a seq, in order.
func (s *Store) Events(ctx context.Context, runID int64, afterSeq int) ([]runtime.Event, error) {
	var evs []runtime.Event
	err := s.db.SelectContext(ctx, &evs, `
		SELECT run_id, seq, kind, round, duration_ms, payload, created_at
		FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq`, runID, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("store: events of run %d: %w", runID, err)
	}
	return evs, nil
}

// insertEvent appends one event inside a caller's transaction;
// runtime.ErrLeaseLost when its seq is taken.
func insertEvent(ctx context.Context, tx sqlx.ExtContext, runID int64, e runtime.Event) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO run_events (run_id, seq, kind, round, duration_ms, payload)
		VALUES (?, ?, ?, ?, ?, ?)`,
		runID, e.Seq, e.Kind, e.Round, e.DurationMS, []byte(e.Payload))
	if isDuplicate(err) {
		// Only the holder appends; a clash means another holder did.
		return fmt.Errorf("store: append event %d of run %d: %w", e.Seq, runID, runtime.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("store: append event %d of run %d: %w", e.Seq, runID, err)
	}
	return nil
}
