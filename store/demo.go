package store

import (
	"context"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
)

var _ builtin.Orders = (*Store)(nil)

// orderRow is one row of demo_orders.
type orderRow struct {
	ID          string `db:"id"`
	Customer    string `db:"customer"`
	AmountCents int64  `db:"amount_cents"`
	Currency    string `db:"currency"`
}

func (r orderRow) order() builtin.Order {
	return builtin.Order{ID: r.ID, Customer: r.Customer, AmountCents: r.AmountCents, Currency: r.Currency}
}

func rowOfOrder(o builtin.Order) orderRow {
	if o.Currency == "" {
		o.Currency = "EUR"
	}
	return orderRow{ID: o.ID, Customer: o.Customer, AmountCents: o.AmountCents, Currency: o.Currency}
}

// demoOrders are the orders the demo seeds.
var demoOrders = []builtin.Order{
	{ID: "ORD-1001", Customer: "Ada Lovelace", AmountCents: 4999, Currency: "EUR"},
	{ID: "ORD-1002", Customer: "Alan Turing", AmountCents: 12900, Currency: "EUR"},
	{ID: "ORD-1003", Customer: "Grace Hopper", AmountCents: 2350, Currency: "USD"},
	{ID: "ORD-1004", Customer: "Edsger Dijkstra", AmountCents: 8800, Currency: "EUR"},
	{ID: "ORD-1005", Customer: "Barbara Liskov", AmountCents: 15000, Currency: "USD"},
	{ID: "ORD-1006", Customer: "Donald Knuth", AmountCents: 256, Currency: "USD"},
	{ID: "ORD-1007", Customer: "Margaret Hamilton", AmountCents: 31415, Currency: "USD"},
	{ID: "ORD-1008", Customer: "Ken Thompson", AmountCents: 6400, Currency: "USD"},
	{ID: "ORD-1009", Customer: "Frances Allen", AmountCents: 9900, Currency: "USD"},
	{ID: "ORD-1010", Customer: "Niklaus Wirth", AmountCents: 7250, Currency: "CHF"},
	{ID: "ORD-1011", Customer: "Sophie Wilson", AmountCents: 1999, Currency: "GBP"},
	{ID: "ORD-1012", Customer: "Leslie Lamport", AmountCents: 42000, Currency: "USD"},
}

// DemoOrders returns the orders SeedDemoOrders inserts, ORD-1001 to
// ORD-1012.
func DemoOrders() []builtin.Order {
	return append([]builtin.Order(nil), demoOrders...)
}

// Order returns a demo order; an error wrapping ErrNotFound when there is
// none with this id.
func (s *Store) Order(ctx context.Context, id string) (builtin.Order, error) {
	const q = `SELECT id, customer, amount_cents, currency FROM demo_orders WHERE id = ?`
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

// SeedDemoOrders inserts the demo orders (see DemoOrders) that are absent;
// orders already there, changed or not, are left alone, so it may run at
// every start.
func (s *Store) SeedDemoOrders(ctx context.Context) error {
	const q = `INSERT IGNORE INTO demo_orders (id, customer, amount_cents, currency)
		VALUES (:id, :customer, :amount_cents, :currency)`
	rows := make([]orderRow, len(demoOrders))
	for i, o := range demoOrders {
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
