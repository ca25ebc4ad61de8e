package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/outbox"
)

var _ outbox.Store = (*Store)(nil)

// deliveryColumns are the outbox's columns in the order deliveryRow
// lists a notification's values.
const deliveryColumns = "(webhook_id, run_id, configuration_id, event, url, secret_env, format, body)"

func deliveryRow(d runtime.Delivery) []any {
	return []any{d.WebhookID, d.RunID, d.ConfigurationID, d.Event, d.URL, d.SecretEnv, d.Format, d.Body}
}

// addDeliveries appends to a step's script the INSERT of its
// notifications, each row written only while guard holds (the step's
// guarded UPDATE won); none, no statement.
func addDeliveries(sc *script, guard string, ds []runtime.Delivery) {
	if len(ds) == 0 {
		return
	}
	rows := make([][]any, len(ds))
	for i, d := range ds {
		rows[i] = deliveryRow(d)
	}
	sc.guardedRows("INSERT INTO webhook_deliveries "+deliveryColumns, guard, rows)
}

// insertDeliveries writes notifications inside a caller's transaction.
func insertDeliveries(ctx context.Context, ex sqlx.ExtContext, ds []runtime.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	q := "INSERT INTO webhook_deliveries " + deliveryColumns + " VALUES "
	var args []any
	for i, d := range ds {
		if i > 0 {
			q += ", "
		}
		q += "(?, ?, ?, ?, ?, ?, ?, ?)"
		args = append(args, deliveryRow(d)...)
	}
	if _, err := ex.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("insert notifications: %w", err)
	}
	return nil
}

// claimedDelivery is a claimed row with its age on the database's clock.
type claimedDelivery struct {
	runtime.Delivery
	AgeMicros int64 `db:"age_us"`
}

// ClaimDeliveries claims up to n due notifications for one attempt each:
// it counts the attempt and pushes next_attempt_at hold into the future,
// so nobody else sends them while this attempt is in flight, and a
// claimer that dies leaves them due again once hold passed. SKIP LOCKED
// lets several claimers (workers, processes) take disjoint batches
// without waiting for each other. The transaction reads at READ
// COMMITTED: at REPEATABLE READ the locking read would also lock the gaps
// of the due index, and the step commits inserting new notifications
// would wait for the claim. None due is an empty list. On a cluster the
// locks hold on this node only: claimers on two nodes can pick the same
// rows, and the one whose commit loses the certification (a deadlock
// error) claimed nothing this time.
func (s *Store) ClaimDeliveries(ctx context.Context, n int, hold time.Duration) ([]runtime.Delivery, error) {
	ds, err := s.claimDeliveries(ctx, n, hold)
	if isContention(err) {
		return nil, nil
	}
	return ds, err
}

func (s *Store) claimDeliveries(ctx context.Context, n int, hold time.Duration) ([]runtime.Delivery, error) {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	defer tx.Rollback()
	var ids []int64
	if err := tx.SelectContext(ctx, &ids, `
		SELECT id FROM webhook_deliveries
		WHERE status = 'pending' AND next_attempt_at <= NOW(6)
		ORDER BY next_attempt_at LIMIT ?
		FOR UPDATE SKIP LOCKED`, n); err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	q, args, err := sqlx.In(`UPDATE webhook_deliveries
		SET attempts = attempts + 1, next_attempt_at = NOW(6) + INTERVAL ? MICROSECOND
		WHERE id IN (?)`, micros(hold), ids)
	if err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	q, args, err = sqlx.In(`SELECT id, webhook_id, run_id, configuration_id, event, url, secret_env, format, body,
			attempts, TIMESTAMPDIFF(MICROSECOND, created_at, NOW(6)) AS age_us
		FROM webhook_deliveries WHERE id IN (?) ORDER BY next_attempt_at, id`, ids)
	if err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	var rows []claimedDelivery
	if err := tx.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: claim deliveries: %w", err)
	}
	out := make([]runtime.Delivery, len(rows))
	for i, r := range rows {
		out[i] = r.Delivery
		out[i].Age = time.Duration(r.AgeMicros) * time.Microsecond
	}
	return out, nil
}

// MarkDelivered records a delivery that a receiver accepted. It holds
// even if the attempt outlived its claim: the receiver has it. A row
// already delivered (or given up) stays as it is.
func (s *Store) MarkDelivered(ctx context.Context, id int64, status int) error {
	if _, err := s.db.ExecContext(ctx, `
		UPDATE webhook_deliveries SET status = 'delivered', delivered_at = NOW(6), last_status = ?, last_error = NULL
		WHERE id = ? AND status = 'pending'`, status, id); err != nil {
		return fmt.Errorf("store: mark delivery %d delivered: %w", id, err)
	}
	return nil
}

// MarkRetry schedules the next attempt of a pending delivery after
// backoff, noting how the attempt went (status 0: no response). It is
// guarded by the attempt's number, so an attempt that outlived its claim
// cannot push back the next one's schedule.
func (s *Store) MarkRetry(ctx context.Context, id int64, attempt, status int, lastErr string, backoff time.Duration) error {
	if _, err := s.db.ExecContext(ctx, `
		UPDATE webhook_deliveries SET next_attempt_at = NOW(6) + INTERVAL ? MICROSECOND,
			last_status = NULLIF(?, 0), last_error = ?
		WHERE id = ? AND status = 'pending' AND attempts = ?`,
		micros(backoff), status, clip(lastErr), id, attempt); err != nil {
		return fmt.Errorf("store: schedule delivery %d again: %w", id, err)
	}
	return nil
}

// MarkFailed gives a pending delivery up, with why, guarded like
// MarkRetry.
func (s *Store) MarkFailed(ctx context.Context, id int64, attempt, status int, lastErr string) error {
	if _, err := s.db.ExecContext(ctx, `
		UPDATE webhook_deliveries SET status = 'failed', last_status = NULLIF(?, 0), last_error = ?
		WHERE id = ? AND status = 'pending' AND attempts = ?`,
		status, clip(lastErr), id, attempt); err != nil {
		return fmt.Errorf("store: give delivery %d up: %w", id, err)
	}
	return nil
}

// clip fits an error into last_error's 1000 characters.
func clip(s string) string {
	r := []rune(s)
	if len(r) > 1000 {
		return string(r[:997]) + "..."
	}
	return s
}
