package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// What operators read of the outbox; the delivery itself (the INSERTs in
// the step's commit, the claims, the marks) is in outbox.go.

// deliveryInfoColumns select a webhook_deliveries row as runtime.DeliveryInfo;
// NULLs become zero values. The body is never read here: at privacy level
// full it carries run content, and operators need where and how far, not
// what.
const deliveryInfoColumns = `id, webhook_id, run_id, configuration_id, event, url, format, status, attempts,
	next_attempt_at, COALESCE(last_status, 0) AS last_status, COALESCE(last_error, '') AS last_error,
	created_at, delivered_at`

// ListDeliveries returns up to limit deliveries, newest first; with
// failedOnly, only those the workers gave up on. A limit below 1 is an
// error.
func (s *Store) ListDeliveries(ctx context.Context, failedOnly bool, limit int) ([]runtime.DeliveryInfo, error) {
	if limit < 1 {
		return nil, fmt.Errorf("store: list deliveries: limit must be at least 1, not %d", limit)
	}
	// Newest first by id (AUTO_INCREMENT follows insertion); the failed
	// ones through webhook_deliveries_due's status prefix.
	q := `SELECT ` + deliveryInfoColumns + ` FROM webhook_deliveries ORDER BY id DESC LIMIT ?`
	if failedOnly {
		q = `SELECT ` + deliveryInfoColumns + ` FROM webhook_deliveries WHERE status = 'failed' ORDER BY id DESC LIMIT ?`
	}
	out := []runtime.DeliveryInfo{}
	if err := s.db.SelectContext(ctx, &out, q, limit); err != nil {
		return nil, fmt.Errorf("store: list deliveries: %w", err)
	}
	return out, nil
}

// RetryDelivery gives a failed delivery to the workers again: pending,
// due now, its attempts and last error kept (the listing shows its
// history until the next attempt). runtime.ErrNotFound for no such
// delivery; a *runtime.DeliveryNotFailedError (errors.Is
// runtime.ErrDeliveryNotFailed), naming its status, for one that is
// pending or delivered. Nothing is written then.
func (s *Store) RetryDelivery(ctx context.Context, id int64) error {
	// The guard on status makes a retry racing a second one, or a worker,
	// harmless: one UPDATE wins, the other finds the row pending.
	res, err := s.db.ExecContext(ctx, `
		UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = NOW(6)
		WHERE id = ? AND status = 'failed'`, id)
	if err := oneRow(res, err, errRetryLost); err == nil {
		return nil
	} else if !errors.Is(err, errRetryLost) {
		return fmt.Errorf("store: retry delivery %d: %w", id, err)
	}
	var status string
	err = s.db.GetContext(ctx, &status, `SELECT status FROM webhook_deliveries WHERE id = ?`, id)
	if err != nil {
		return notFound(fmt.Sprintf("retry delivery %d", id), err)
	}
	return fmt.Errorf("store: retry delivery %d: %w", id, &runtime.DeliveryNotFailedError{ID: id, Status: status})
}

// errRetryLost: RetryDelivery's guard said no; it reads why.
var errRetryLost = errors.New("no failed delivery")

// OldestPendingAge is how long the oldest pending delivery has existed,
// measured on the database's clock; false when none is pending. A growing
// age means receivers keep failing, or the workers do not keep up.
func (s *Store) OldestPendingAge(ctx context.Context) (time.Duration, bool, error) {
	// webhook_deliveries_due's status prefix finds the pending rows; they
	// are few unless receivers are down, which is when this matters.
	return s.oldestAge(ctx, "oldest pending delivery", `
		SELECT TIMESTAMPDIFF(MICROSECOND, MIN(created_at), NOW(6)) FROM webhook_deliveries WHERE status = 'pending'`)
}

// FailedDeliveriesOfRun returns the deliveries about a run that the
// workers gave up on, oldest first; none is an empty list.
func (s *Store) FailedDeliveriesOfRun(ctx context.Context, runID int64) ([]runtime.DeliveryInfo, error) {
	out := []runtime.DeliveryInfo{}
	err := s.db.SelectContext(ctx, &out, `SELECT `+deliveryInfoColumns+` FROM webhook_deliveries
		WHERE run_id = ? AND status = 'failed' ORDER BY id`, runID)
	if err != nil {
		return nil, fmt.Errorf("store: failed deliveries of run %d: %w", runID, err)
	}
	return out, nil
}
