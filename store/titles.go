package store

import (
	"context"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
)

// SetTitle sets a run's (sealed) title. A person's title (TitleSet) goes
// over any; a generated one only over the cut one, so that it never
// replaces what a person set while the provider was asked:
// runtime.ErrClaimLost then. runtime.ErrNotFound for no run, or an erased
// one.
func (s *Store) SetTitle(ctx context.Context, runID int64, title, source string) error {
	guard := ""
	if source == runtime.TitleGenerated {
		guard = " AND title_source = 'cut'"
	}
	res, err := s.db.ExecContext(ctx, `UPDATE runs SET title = ?, title_source = ?, updated_at = NOW(6)
		WHERE id = ? AND erased_at IS NULL`+guard, []byte(title), source, runID)
	if err != nil {
		return fmt.Errorf("store: title of run %d: %w", runID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	if source == runtime.TitleGenerated {
		return fmt.Errorf("store: title of run %d: %w", runID, runtime.ErrClaimLost)
	}
	return fmt.Errorf("store: title of run %d: %w", runID, runtime.ErrNotFound)
}
