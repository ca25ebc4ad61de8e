package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// claimNext hands the oldest run of a status to a new holder. SKIP LOCKED
// lets many workers claim side by side without waiting on each other's
// candidates; the guarded UPDATE is what makes the claim count. On a
// cluster that lock holds on this node only: a worker on another node that
// took the same run makes this claim fail its certification, a deadlock
// error, which is a lost claim like a guard that said no.
func (s *Store) claimNext(ctx context.Context, status runtime.Status, order, claimedBy string, lease time.Duration) (*runtime.Run, error) {
	id, err := s.claimNextID(ctx, status, order, claimedBy, lease)
	if isContention(err) {
		return nil, runtime.ErrClaimLost
	}
	if err != nil {
		return nil, err
	}
	return s.Run(ctx, id)
}

func (s *Store) claimNextID(ctx context.Context, status runtime.Status, order, claimedBy string, lease time.Duration) (int64, error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var id int64
	err = tx.GetContext(ctx, &id, `SELECT id FROM runs WHERE status = ? ORDER BY `+order+` LIMIT 1 FOR UPDATE SKIP LOCKED`, status)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, runtime.ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `
		UPDATE runs SET status = 'running', claimed_by = ?,
			lease_expires_at = NOW(6) + INTERVAL ? MICROSECOND, updated_at = NOW(6)
		WHERE id = ? AND status = ?`, claimedBy, micros(lease), id, status)
	if err := oneRow(res, err, runtime.ErrClaimLost); err != nil {
		return 0, err
	}
	return id, tx.Commit()
}

// ClaimDecided claims the oldest decided run for a worker; runtime.ErrNotFound
// when none waits.
func (s *Store) ClaimDecided(ctx context.Context, claimedBy string, lease time.Duration) (*runtime.Run, error) {
	r, err := s.claimNext(ctx, runtime.StatusDecided, "decided_at, id", claimedBy, lease)
	if err != nil {
		return nil, fmt.Errorf("store: claim decided run: %w", err)
	}
	return r, nil
}

// ClaimQueued claims the oldest queued run for a worker; runtime.ErrNotFound when
// none waits.
func (s *Store) ClaimQueued(ctx context.Context, claimedBy string, lease time.Duration) (*runtime.Run, error) {
	r, err := s.claimNext(ctx, runtime.StatusQueued, "created_at, id", claimedBy, lease)
	if err != nil {
		return nil, fmt.Errorf("store: claim queued run: %w", err)
	}
	return r, nil
}

// ClaimExpired takes over the running run whose lease expired longest ago:
// its holder died (a crashed request, process or worker). runtime.ErrNotFound when
// every lease is alive.
func (s *Store) ClaimExpired(ctx context.Context, claimedBy string, lease time.Duration) (*runtime.Run, error) {
	var id int64
	err := s.db.GetContext(ctx, &id, `
		SELECT id FROM runs WHERE status = 'running' AND lease_expires_at < NOW(6)
		ORDER BY lease_expires_at LIMIT 1`)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: claim expired run: %w", runtime.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: claim expired run: %w", err)
	}
	if err := s.TakeOver(ctx, id, claimedBy, lease); err != nil {
		return nil, err
	}
	return s.Run(ctx, id)
}

// Heartbeat records that a worker process is alive.
func (s *Store) Heartbeat(ctx context.Context, id, host string, pid int) error {
	_, err := s.db.ExecContext(ctx, `
		INSERT INTO workers (id, host, pid) VALUES (?, ?, ?)
		ON DUPLICATE KEY UPDATE seen_at = NOW(6)`, id, host, pid)
	if err != nil {
		return fmt.Errorf("store: heartbeat of worker %s: %w", id, err)
	}
	return nil
}

// RemoveWorker forgets a worker process that stopped.
func (s *Store) RemoveWorker(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM workers WHERE id = ?`, id); err != nil {
		return fmt.Errorf("store: remove worker %s: %w", id, err)
	}
	return nil
}

// WorkersAlive counts the worker processes seen within the window.
func (s *Store) WorkersAlive(ctx context.Context, window time.Duration) (int, error) {
	var n int
	err := s.db.GetContext(ctx, &n, `
		SELECT COUNT(*) FROM workers WHERE seen_at > NOW(6) - INTERVAL ? MICROSECOND`, micros(window))
	if err != nil {
		return 0, fmt.Errorf("store: workers alive: %w", err)
	}
	return n, nil
}

// ContinuingRuns lists the interactive runs that continue in the
// background (decided, or running) which a user owns or decided.
func (s *Store) ContinuingRuns(ctx context.Context, userID int64, limit int) ([]*runtime.Run, error) {
	var runs []*runtime.Run
	err := s.db.SelectContext(ctx, &runs, `
		SELECT `+runColumns+` FROM runs r
		WHERE status IN ('decided', 'running') AND origin = 'interactive'
			AND (owner_id = ? OR EXISTS (
				SELECT 1 FROM decisions d WHERE d.run_id = r.id AND d.decided_by = ?))
		ORDER BY updated_at LIMIT ?`, userID, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: continuing runs: %w", err)
	}
	return runs, nil
}
