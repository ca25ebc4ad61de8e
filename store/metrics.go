package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// OldestDecidedAge is how long the oldest decided run has waited for a
// worker, measured on the database's clock; false when no run is decided.
// A growing age means the workers do not keep up, or none is alive.
func (s *Store) OldestDecidedAge(ctx context.Context) (time.Duration, bool, error) {
	// runs_status_decided (status, decided_at) answers this from the index.
	return s.oldestAge(ctx, "oldest decided run", `
		SELECT TIMESTAMPDIFF(MICROSECOND, MIN(decided_at), NOW(6)) FROM runs WHERE status = 'decided'`)
}

// oldestAge runs query, which measures an age in microseconds on the
// database's clock (NULL when nothing is that old), and returns it; false
// for NULL.
func (s *Store) oldestAge(ctx context.Context, what, query string) (time.Duration, bool, error) {
	var micros sql.NullInt64
	if err := s.db.GetContext(ctx, &micros, query); err != nil {
		return 0, false, fmt.Errorf("store: %s: %w", what, err)
	}
	if !micros.Valid {
		return 0, false, nil
	}
	return max(time.Duration(micros.Int64)*time.Microsecond, 0), true, nil
}
