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
	var micros sql.NullInt64
	err := s.db.GetContext(ctx, &micros, `
		SELECT TIMESTAMPDIFF(MICROSECOND, MIN(decided_at), NOW(6)) FROM runs WHERE status = 'decided'`)
	if err != nil {
		return 0, false, fmt.Errorf("store: oldest decided run: %w", err)
	}
	if !micros.Valid {
		return 0, false, nil
	}
	return max(time.Duration(micros.Int64)*time.Microsecond, 0), true, nil
}
