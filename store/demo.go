package store

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
)

// orderRow is one row of demo_orders.
type orderRow struct {
	ID          string `db:"id"`
	Customer    string `db:"customer"`
	AmountCents int64  `db:"amount_cents"`
	Currency    string `db:"currency"`
	Owner       string `db:"owner"`
}

func (r orderRow) order() builtin.Order {
	return builtin.Order{ID: r.ID, Customer: r.Customer, AmountCents: r.AmountCents, Currency: r.Currency, Owner: r.Owner}
}

func rowOfOrder(o builtin.Order) orderRow {
	if o.Currency == "" {
		o.Currency = "EUR"
	}
	return orderRow{ID: o.ID, Customer: o.Customer, AmountCents: o.AmountCents, Currency: o.Currency, Owner: o.Owner}
}

// Order returns a demo order; an error wrapping runtime.ErrNotFound when there is
// none with this id.
func (s *Store) Order(ctx context.Context, id string) (builtin.Order, error) {
	const q = `SELECT id, customer, amount_cents, currency, COALESCE(owner, '') AS owner FROM demo_orders WHERE id = ?`
	var r orderRow
	if err := s.db.GetContext(ctx, &r, q, id); err != nil {
		return builtin.Order{}, notFound(fmt.Sprintf("order %q", id), err)
	}
	return r.order(), nil
}

// InsertRefund records one refund and returns its id. It never
// de-duplicates (demo_refunds has no unique key on purpose), so a repeated
// execution of refund_order shows as a second row.
func (s *Store) InsertRefund(ctx context.Context, r builtin.Refund) (int64, error) {
	const q = `INSERT INTO demo_refunds (order_id, amount_cents, run_id, call_id) VALUES (?, ?, ?, ?)`
	res, err := s.db.ExecContext(ctx, q, r.OrderID, r.AmountCents, r.RunID, r.CallID)
	if err != nil {
		return 0, fmt.Errorf("store: insert refund of order %q: %w", r.OrderID, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("store: insert refund of order %q: %w", r.OrderID, err)
	}
	return id, nil
}

// RefundCount returns how many refunds an order has had, 0 for an order
// without refunds or an unknown one.
func (s *Store) RefundCount(ctx context.Context, orderID string) (int, error) {
	const q = `SELECT COUNT(*) FROM demo_refunds WHERE order_id = ?`
	var n int
	if err := s.db.GetContext(ctx, &n, q, orderID); err != nil {
		return 0, fmt.Errorf("store: count refunds of order %q: %w", orderID, err)
	}
	return n, nil
}

// DemoOrdersOf lists the demo orders of one owner (a user name), by id.
func (s *Store) DemoOrdersOf(ctx context.Context, owner string) ([]builtin.Order, error) {
	var rows []orderRow
	if err := s.db.SelectContext(ctx, &rows, `SELECT id, customer, amount_cents, currency, owner
		FROM demo_orders WHERE owner = ? ORDER BY id`, owner); err != nil {
		return nil, fmt.Errorf("store: demo orders of %q: %w", owner, err)
	}
	orders := make([]builtin.Order, len(rows))
	for i, r := range rows {
		orders[i] = r.order()
	}
	return orders, nil
}

// SeedDemoOrders inserts the orders that are absent; orders already
// there, changed or not, are left alone, so it may run at every start,
// but for an owner they lack (a database seeded before orders had one).
func (s *Store) SeedDemoOrders(ctx context.Context, orders []builtin.Order) error {
	const q = `INSERT INTO demo_orders (id, customer, amount_cents, currency, owner)
		VALUES (:id, :customer, :amount_cents, :currency, NULLIF(:owner, ''))
		ON DUPLICATE KEY UPDATE owner = COALESCE(owner, VALUES(owner))`
	rows := make([]orderRow, len(orders))
	for i, o := range orders {
		rows[i] = rowOfOrder(o)
	}
	if _, err := s.db.NamedExecContext(ctx, q, rows); err != nil {
		return fmt.Errorf("store: seed demo orders: %w", err)
	}
	return nil
}

// CreateDemoOrder inserts one order (currency EUR when empty), for tests
// and fixtures. An existing id is an error wrapping ErrDuplicate.
func (s *Store) CreateDemoOrder(ctx context.Context, o builtin.Order) error {
	const q = `INSERT INTO demo_orders (id, customer, amount_cents, currency)
		VALUES (:id, :customer, :amount_cents, :currency)`
	if _, err := s.db.NamedExecContext(ctx, q, rowOfOrder(o)); err != nil {
		if isDuplicate(err) {
			return fmt.Errorf("store: create demo order %q: %w", o.ID, ErrDuplicate)
		}
		return fmt.Errorf("store: create demo order %q: %w", o.ID, err)
	}
	return nil
}

// heldRun is a run a live continuation holds.
type heldRun struct {
	ID        int64  `db:"id"`
	ClaimedBy string `db:"claimed_by"`
}

// DeleteDemoRuns deletes, in one transaction, every run of the
// configurations named, the rows that hang off them, and all of
// demo_refunds (which only the demo's refund_order writes), and says how
// many runs and refunds it deleted. The runs are locked first, so no
// claim slips in between; a run whose lease is live means a continuation
// is under way, and then nothing is deleted and the error says which.
func (s *Store) DeleteDemoRuns(ctx context.Context, identifiers []string) (runs, refunds int64, err error) {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("store: delete demo runs: %w", err)
	}
	defer tx.Rollback()
	q, args, err := sqlx.In(`SELECT r.id FROM runs r JOIN configurations c ON c.id = r.configuration_id
		WHERE c.identifier IN (?) ORDER BY r.id FOR UPDATE`, identifiers)
	if err != nil {
		return 0, 0, fmt.Errorf("store: delete demo runs: %w", err)
	}
	var ids []int64
	if err := tx.SelectContext(ctx, &ids, q, args...); err != nil {
		return 0, 0, fmt.Errorf("store: delete demo runs: list the demo's runs: %w", err)
	}
	if len(ids) > 0 {
		q, args, err := sqlx.In(`SELECT id, claimed_by FROM runs
			WHERE id IN (?) AND claimed_by IS NOT NULL AND lease_expires_at > NOW(6) ORDER BY id`, ids)
		if err != nil {
			return 0, 0, fmt.Errorf("store: delete demo runs: %w", err)
		}
		var held []heldRun
		if err := tx.SelectContext(ctx, &held, q, args...); err != nil {
			return 0, 0, fmt.Errorf("store: delete demo runs: look for held runs: %w", err)
		}
		if len(held) > 0 {
			return 0, 0, fmt.Errorf("run %d is being continued right now (by %s); let it pause or end, or stop turnstile serve and work, and reset again; nothing was deleted",
				held[0].ID, held[0].ClaimedBy)
		}
		for _, table := range []string{"run_events", "run_messages", "run_partials", "decisions", "standing_approvals"} {
			q, args, err := sqlx.In(`DELETE FROM `+table+` WHERE run_id IN (?)`, ids)
			if err != nil {
				return 0, 0, fmt.Errorf("store: delete demo runs: %w", err)
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return 0, 0, fmt.Errorf("store: delete demo runs: delete from %s: %w", table, err)
			}
		}
		q, args, err = sqlx.In(`DELETE FROM runs WHERE id IN (?)`, ids)
		if err != nil {
			return 0, 0, fmt.Errorf("store: delete demo runs: %w", err)
		}
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return 0, 0, fmt.Errorf("store: delete demo runs: delete the runs: %w", err)
		}
		if runs, err = res.RowsAffected(); err != nil {
			return 0, 0, fmt.Errorf("store: delete demo runs: delete the runs: %w", err)
		}
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM demo_refunds`)
	if err != nil {
		return 0, 0, fmt.Errorf("store: delete demo runs: delete the refunds: %w", err)
	}
	if refunds, err = res.RowsAffected(); err != nil {
		return 0, 0, fmt.Errorf("store: delete demo runs: delete the refunds: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("store: delete demo runs: %w", err)
	}
	return runs, refunds, nil
}
