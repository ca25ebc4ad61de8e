package store

import (
	"context"
	"fmt"
)

// expiredPausesQuery finds the waiting runs whose deadline passed. Only a
// waiting run with a deadline has one (the claim, a cancel and a settle
// clear it), so the range on runs_decision_deadline reads those runs and
// no other: the sweep costs the same with a million runs waiting without
// a deadline as with none. The status is checked on the row all the same:
// the claim that settles an expiry is guarded by it anyway.
const expiredPausesQuery = `SELECT id FROM runs
	WHERE decision_deadline < NOW(6) AND status IN ('waiting_for_approval', 'waiting_for_input')
	ORDER BY decision_deadline LIMIT ?`

// ExpiredPauses lists up to limit waiting runs whose decision deadline
// passed, the longest expired first, or none. It locks nothing: the
// caller settles each through Claim, guarded by status and turn digest,
// which alone decides whether the expiry or a person wins.
func (s *Store) ExpiredPauses(ctx context.Context, limit int) ([]int64, error) {
	ids := []int64{}
	if err := s.db.SelectContext(ctx, &ids, expiredPausesQuery, limit); err != nil {
		return nil, fmt.Errorf("store: expired pauses: %w", err)
	}
	return ids, nil
}
