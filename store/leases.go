package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// micros turns a lease into the microseconds MySQL's INTERVAL takes; leases
// are computed on the database's clock so that every process agrees on
// when one expired.
func micros(d time.Duration) int64 { return d.Microseconds() }

// leaseBatch bounds the runs one lease renewal statement names.
const leaseBatch = 500

// RenewLeases extends the leases of many held runs, a batch per statement,
// and returns the runs that their holder no longer holds. Each run is
// renewed only while it runs under the very claim named (id and holder
// together); the plain id list beside the pairs gives MySQL the primary
// key to go by.
func (s *Store) RenewLeases(ctx context.Context, held []runtime.Lease, lease time.Duration) ([]int64, error) {
	var lost []int64
	for batch := range slices.Chunk(held, leaseBatch) {
		ids := strings.Repeat("?, ", len(batch)-1) + "?"
		pairs := strings.Repeat("(?, ?), ", len(batch)-1) + "(?, ?)"
		where := `status = 'running' AND id IN (` + ids + `) AND (id, claimed_by) IN (` + pairs + `)`
		args := make([]any, 0, 3*len(batch))
		for _, l := range batch {
			args = append(args, l.RunID)
		}
		for _, l := range batch {
			args = append(args, l.RunID, l.ClaimedBy)
		}
		res, err := s.db.ExecContext(ctx, `UPDATE runs SET lease_expires_at = NOW(6) + INTERVAL ? MICROSECOND
			WHERE `+where, append([]any{micros(lease)}, args...)...)
		if err != nil {
			return lost, fmt.Errorf("store: renew %d leases: %w", len(batch), err)
		}
		if n, err := res.RowsAffected(); err == nil && int(n) == len(batch) {
			continue
		}
		// Some claim moved on: find out which of them are still held.
		var still []int64
		if err := s.db.SelectContext(ctx, &still, `SELECT id FROM runs WHERE `+where, args...); err != nil {
			return lost, fmt.Errorf("store: renew %d leases: %w", len(batch), err)
		}
		for _, l := range batch {
			if !slices.Contains(still, l.RunID) {
				lost = append(lost, l.RunID)
			}
		}
	}
	return lost, nil
}

// MarkPendingEffect stamps the call whose write is about to run;
// runtime.ErrLeaseLost when the holder does not hold the run,
// runtime.ErrCancelRequested, with nothing stamped, when someone asked to
// cancel it.
func (s *Store) MarkPendingEffect(ctx context.Context, runID int64, claimedBy, callID string, lease time.Duration) error {
	// The cancel flag is in the guard: a cancel requested since the last
	// step boundary stops the write before it starts, not after it.
	res, err := execContended(ctx, s.db, `
		UPDATE runs SET pending_effect = ?, lease_expires_at = NOW(6) + INTERVAL ? MICROSECOND
		WHERE id = ? AND status = 'running' AND claimed_by = ? AND cancel_requested = 0`, callID, micros(lease), runID, claimedBy)
	err = oneRow(res, err, runtime.ErrLeaseLost)
	if errors.Is(err, runtime.ErrLeaseLost) {
		if r, rerr := s.Run(ctx, runID); rerr == nil && r.Status == runtime.StatusRunning && r.ClaimedBy == claimedBy && r.CancelRequested {
			err = runtime.ErrCancelRequested
		}
	}
	if err != nil {
		return fmt.Errorf("store: mark pending effect of run %d: %w", runID, err)
	}
	return nil
}

// TakeOver hands a running run whose lease expired to a new holder. It is
// how a worker recovers a continuation whose request or process died;
// ErrClaimLost when the lease is still alive or someone else took it.
func (s *Store) TakeOver(ctx context.Context, runID int64, claimedBy string, lease time.Duration) error {
	res, err := s.db.ExecContext(ctx, `
		UPDATE runs SET claimed_by = ?, lease_expires_at = NOW(6) + INTERVAL ? MICROSECOND,
			updated_at = NOW(6)
		WHERE id = ? AND status = 'running' AND lease_expires_at < NOW(6)`,
		claimedBy, micros(lease), runID)
	if isContention(err) {
		err = runtime.ErrClaimLost // another node's worker took it first
	}
	if err := oneRow(res, err, runtime.ErrClaimLost); err != nil {
		return fmt.Errorf("store: take over run %d: %w", runID, err)
	}
	return nil
}

// CancelsRequested lists the running runs whose cancel flag is set, with
// their holders: what every process that holds runs polls to learn of a
// cancel asked through another process. The flagged running runs are few
// (a holder settles one within a second) and the index runs_cancel_requested
// holds exactly them at its front, so the read costs the same whether the
// cluster runs ten runs or ten thousand.
func (s *Store) CancelsRequested(ctx context.Context) ([]runtime.Lease, error) {
	var flagged []runtime.Lease
	if err := s.db.SelectContext(ctx, &flagged, `
		SELECT id, COALESCE(claimed_by, '') AS claimed_by FROM runs FORCE INDEX (runs_cancel_requested)
		WHERE status = 'running' AND cancel_requested = 1`); err != nil {
		return nil, fmt.Errorf("store: read cancel requests: %w", err)
	}
	return flagged, nil
}
