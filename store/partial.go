package store

import (
	"context"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
)

// SavePartial writes the answer a run's round is streaming, over the one
// before it, only while claimedBy holds the run: a holder that lost its
// lease writes nothing (runtime.ErrLeaseLost). It is one statement, an
// INSERT that reads its guard from the run's row, so no transaction.
func (s *Store) SavePartial(ctx context.Context, p runtime.StoredPartial, claimedBy string) error {
	res, err := s.db.ExecContext(ctx, `
		INSERT INTO run_partials (run_id, idx, turn, body, updated_at)
		SELECT id, ?, ?, ?, NOW(6) FROM runs WHERE id = ? AND status = 'running' AND claimed_by = ?
		ON DUPLICATE KEY UPDATE idx = VALUES(idx), turn = VALUES(turn), body = VALUES(body), updated_at = VALUES(updated_at)`,
		p.Idx, p.Turn, p.Body, p.RunID, claimedBy)
	if err != nil {
		return fmt.Errorf("store: partial answer of run %d: %w", p.RunID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	return fmt.Errorf("store: partial answer of run %d: %w", p.RunID, runtime.ErrLeaseLost)
}

// Partial returns the last partial answer written for a run (it may be
// stale: see runtime.StoredPartial), or runtime.ErrNotFound.
func (s *Store) Partial(ctx context.Context, runID int64) (runtime.StoredPartial, error) {
	var p runtime.StoredPartial
	err := s.reads().GetContext(ctx, &p, `SELECT run_id, idx, turn, body, updated_at FROM run_partials WHERE run_id = ?`, runID)
	if err != nil {
		return p, notFound(fmt.Sprintf("partial answer of run %d", runID), err)
	}
	return p, nil
}
