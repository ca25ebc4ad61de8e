package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
)

// UnsettledRuns lists the runs a user owns that have not settled, by id:
// their id, configuration, owner and status.
func (s *Store) UnsettledRuns(ctx context.Context, ownerID int64) ([]*runtime.Run, error) {
	q, args, err := sqlx.In(`SELECT id, configuration_id, owner_id, status FROM runs
		WHERE owner_id = ? AND status IN (?) ORDER BY id`, ownerID, runtime.UnsettledStatuses())
	if err != nil {
		return nil, fmt.Errorf("store: unsettled runs of user %d: %w", ownerID, err)
	}
	runs := []*runtime.Run{}
	if err := s.db.SelectContext(ctx, &runs, q, args...); err != nil {
		return nil, fmt.Errorf("store: unsettled runs of user %d: %w", ownerID, err)
	}
	return runs, nil
}

// ownedRow is an unsettled run of a user being deleted, as the deletion's
// locking read finds it.
type ownedRow struct {
	ID     int64          `db:"id"`
	Status runtime.Status `db:"status"`
}

// is reports whether the row is the run the deletion planned for.
func (o ownedRow) is(r runtime.OwnedRun) bool { return o.ID == r.ID && o.Status == r.Status }

// DeleteUser deletes a user in one transaction with everything that must
// not outlive them: their API tokens and run credentials go, each of d.Runs is cancelled as
// owner_deleted (an idle one at once, with its events and notifications;
// a running one flagged, so that its holder cancels it at its next step
// boundary and settles it once), and the user's row goes last. It reports
// how many tokens it deleted. An error wrapping runtime.ErrNotFound when
// there is no such user; runtime.ErrClaimLost when the user's unsettled
// runs, read under lock, are not d.Runs in their statuses (one moved, or a
// new one came): nothing is written either way, nor when any statement
// fails.
func (s *Store) DeleteUser(ctx context.Context, d runtime.UserDeletion) (int, error) {
	fail := func(err error) (int, error) {
		return 0, fmt.Errorf("store: delete user %d: %w", d.UserID, err)
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	var id int64
	if err := tx.GetContext(ctx, &id, `SELECT id FROM users WHERE id = ? FOR UPDATE`, d.UserID); err != nil {
		return 0, notFound(fmt.Sprintf("delete user %d", d.UserID), err)
	}
	// The locking read goes by runs_owner and locks the gap after the
	// user's last run too: a run created for them meanwhile waits for this
	// commit (and its continuation then finds its owner gone).
	q, args, err := sqlx.In(`SELECT id, status FROM runs WHERE owner_id = ? AND status IN (?)
		ORDER BY id FOR UPDATE`, d.UserID, runtime.UnsettledStatuses())
	if err != nil {
		return fail(err)
	}
	var locked []ownedRow
	if err := tx.SelectContext(ctx, &locked, q, args...); err != nil {
		return fail(err)
	}
	if !slices.EqualFunc(locked, d.Runs, ownedRow.is) {
		return fail(runtime.ErrClaimLost)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM api_tokens WHERE user_id = ?`, d.UserID)
	if err != nil {
		return fail(err)
	}
	tokens, err := res.RowsAffected()
	if err != nil {
		return fail(err)
	}
	// Their runs' credentials stop acting for them at once: a running
	// continuation's next call of a forwarding server is refused.
	if _, err := tx.ExecContext(ctx, `DELETE FROM run_tokens WHERE owner_id = ?`, d.UserID); err != nil {
		return fail(err)
	}
	for _, r := range d.Runs {
		if r.Status != runtime.StatusRunning {
			if err := cancelIdle(ctx, tx, r.ID, r.Status, runtime.ReasonOwnerDeleted, r.Events, r.Notifications); err != nil {
				return fail(err)
			}
			continue
		}
		res, err := tx.ExecContext(ctx, `UPDATE runs SET cancel_requested = 1, updated_at = NOW(6)
			WHERE id = ? AND status = 'running'`, r.ID)
		if err := oneRow(res, err, runtime.ErrClaimLost); err != nil {
			return fail(fmt.Errorf("run %d: %w", r.ID, err))
		}
	}
	res, err = tx.ExecContext(ctx, `DELETE FROM users WHERE id = ?`, d.UserID)
	if err := oneRow(res, err, runtime.ErrNotFound); err != nil {
		return fail(err)
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return int(tokens), nil
}

// OwnerDeleted reports whether the owner of a run no longer exists; true,
// too, for a run that does not exist.
func (s *Store) OwnerDeleted(ctx context.Context, runID int64) (bool, error) {
	var gone bool
	err := s.db.GetContext(ctx, &gone, `
		SELECT NOT EXISTS (SELECT 1 FROM runs r JOIN users u ON u.id = r.owner_id WHERE r.id = ?)`, runID)
	if err != nil {
		return false, fmt.Errorf("store: owner of run %d: %w", runID, err)
	}
	return gone, nil
}
