package store

import (
	"context"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Decision returns the decision recorded for a turn, or runtime.ErrNotFound.
func (s *Store) Decision(ctx context.Context, runID int64, digest string) (*runtime.DecisionRecord, error) {
	var d runtime.DecisionRecord
	err := s.db.GetContext(ctx, &d, `
		SELECT d.run_id, d.turn_digest, d.kind, d.scope, d.reason, COALESCE(d.input, '') AS input,
			d.decided_by, COALESCE(u.name, '') AS decider_name, d.decided_at, d.path
		FROM decisions d LEFT JOIN users u ON u.id = d.decided_by
		WHERE d.run_id = ? AND d.turn_digest = ?`, runID, digest)
	if err != nil {
		return nil, notFound(fmt.Sprintf("decision of run %d", runID), err)
	}
	return &d, nil
}
