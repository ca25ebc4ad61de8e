package store

import (
	"context"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
)

var _ runtime.SweepStore = (*Store)(nil)

// DeleteDeadTokens deletes up to limit API tokens that can never
// authenticate again, the longest dead first: expired ones (each use
// moves expires_at on, so one that passed stays passed) and revoked ones.
// It reports how many it deleted.
func (s *Store) DeleteDeadTokens(ctx context.Context, limit int) (int, error) {
	deleted := 0
	// One statement per key, each going by its index (a condition with
	// OR would scan every token and lock the live ones too).
	for _, q := range []string{
		`DELETE FROM api_tokens WHERE expires_at <= NOW(6) ORDER BY expires_at LIMIT ?`,
		`DELETE FROM api_tokens WHERE revoked_at IS NOT NULL ORDER BY revoked_at LIMIT ?`,
	} {
		if deleted >= limit {
			break
		}
		res, err := s.db.ExecContext(ctx, q, limit-deleted)
		if err != nil {
			return deleted, fmt.Errorf("store: delete dead tokens: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return deleted, fmt.Errorf("store: delete dead tokens: %w", err)
		}
		deleted += int(n)
	}
	return deleted, nil
}

// DeleteExpiredSessions deletes up to limit sessions whose expiry passed,
// the oldest first, and reports how many it deleted. Expired is what scs's
// mysqlstore takes it for (expiry before UTC_TIMESTAMP(6)), so a session
// it would still find is never deleted.
func (s *Store) DeleteExpiredSessions(ctx context.Context, limit int) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM sessions WHERE expiry < UTC_TIMESTAMP(6) ORDER BY expiry LIMIT ?`, limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete expired sessions: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: delete expired sessions: %w", err)
	}
	return int(n), nil
}
