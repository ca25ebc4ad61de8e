package store

import (
	"context"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
)

// orderRow is one row of demo_orders.
type orderRow struct {
	ID          string `db:"id"`
	Customer    string `db:"customer"`
	AmountCents int64  `db:"amount_cents"`
	Currency    string `db:"currency"`
}

func (r orderRow) order() runtime.Order {
	return runtime.Order{ID: r.ID, Customer: r.Customer, AmountCents: r.AmountCents, Currency: r.Currency}
}

func rowOfOrder(o runtime.Order) orderRow {
	if o.Currency == "" {
		o.Currency = "EUR"
	}
	return orderRow{ID: o.ID, Customer: o.Customer, AmountCents: o.AmountCents, Currency: o.Currency}
}

// Order returns a demo order; an error wrapping runtime.ErrNotFound when there is
// none with this id.
func (s *Store) Order(ctx context.Context, id string) (runtime.Order, error) {
	const q = `SELECT id, customer, amount_cents, currency FROM demo_orders WHERE id = ?`
	var r orderRow
	if err := s.db.GetContext(ctx, &r, q, id); err != nil {
		return runtime.Order{}, notFound(fmt.Sprintf("order %q", id), err)
	}
	return r.order(), nil
}

// InsertRefund records one refund and returns its id. It never
// de-duplicates (demo_refunds has no unique key on purpose), so a repeated
// execution of refund_order shows as a second row.
func (s *Store) InsertRefund(ctx context.Context, r runtime.Refund) (int64, error) {
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

// SeedDemoOrders inserts the orders that are absent; orders already
// there, changed or not, are left alone, so it may run at every start.
func (s *Store) SeedDemoOrders(ctx context.Context, orders []runtime.Order) error {
	const q = `INSERT IGNORE INTO demo_orders (id, customer, amount_cents, currency)
		VALUES (:id, :customer, :amount_cents, :currency)`
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
func (s *Store) CreateDemoOrder(ctx context.Context, o runtime.Order) error {
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
