package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	db, _ := dbtest.New(t)
	return store.New(db)
}

func TestOrder(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	want := builtin.Order{ID: "ORD-T1", Customer: "Käthe Kollwitz", AmountCents: 1234, Currency: "USD"}
	if err := s.CreateDemoOrder(ctx, want); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		id      string
		want    builtin.Order
		wantErr error
	}{
		{name: "exists", id: "ORD-T1", want: want},
		{name: "absent", id: "ORD-NONE", wantErr: runtime.ErrNotFound},
		{name: "ids compare exactly", id: "ord-t1", wantErr: runtime.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Order(ctx, tt.id)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Order(%q) error = %v, want %v", tt.id, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Order(%q) = %+v, want %+v", tt.id, got, tt.want)
			}
		})
	}
}

func TestCreateDemoOrder(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.CreateDemoOrder(ctx, builtin.Order{ID: "ORD-T2", Customer: "C", AmountCents: 10}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Order(ctx, "ORD-T2")
	if err != nil {
		t.Fatal(err)
	}
	if want := "EUR"; got.Currency != want {
		t.Errorf("currency = %q, want the default %q", got.Currency, want)
	}
	err = s.CreateDemoOrder(ctx, builtin.Order{ID: "ORD-T2", Customer: "D", AmountCents: 20})
	if !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("second CreateDemoOrder error = %v, want ErrDuplicate", err)
	}
}

// seedOrders stand for the demo's orders (cmd/turnstile seeds its own).
var seedOrders = []builtin.Order{
	{ID: "ORD-1001", Customer: "Ada Lovelace", AmountCents: 4999, Currency: "EUR"},
	{ID: "ORD-1002", Customer: "Alan Turing", AmountCents: 12900, Currency: "EUR"},
	{ID: "ORD-1003", Customer: "Grace Hopper", AmountCents: 2350, Currency: "USD"},
}

func TestSeedDemoOrders(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	// An order changed by hand keeps its change: seeding only adds.
	changed := builtin.Order{ID: "ORD-1003", Customer: "Changed", AmountCents: 1, Currency: "EUR"}
	if err := s.CreateDemoOrder(ctx, changed); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.SeedDemoOrders(ctx, seedOrders); err != nil {
			t.Fatalf("SeedDemoOrders: %v", err)
		}
	}
	var count int
	if err := s.DB().GetContext(ctx, &count, `SELECT COUNT(*) FROM demo_orders`); err != nil {
		t.Fatal(err)
	}
	if got, want := count, len(seedOrders); got != want {
		t.Errorf("demo_orders has %d rows after seeding twice, want %d", got, want)
	}
	for _, want := range seedOrders {
		if want.ID == changed.ID {
			want = changed
		}
		got, err := s.Order(ctx, want.ID)
		if err != nil {
			t.Errorf("Order(%q): %v", want.ID, err)
			continue
		}
		if got != want {
			t.Errorf("Order(%q) = %+v, want %+v", want.ID, got, want)
		}
	}
}

func TestInsertRefundAndCount(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.SeedDemoOrders(ctx, seedOrders); err != nil {
		t.Fatal(err)
	}
	// No de-duplication: the same call refunded twice is two rows.
	r := builtin.Refund{OrderID: "ORD-1001", AmountCents: 4999, RunID: 42, CallID: "call-a"}
	first, err := s.InsertRefund(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	second, err := s.InsertRefund(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if first < 1 || second <= first {
		t.Errorf("refund ids = %d, %d; want two increasing positive ids", first, second)
	}
	var got struct {
		OrderID     string `db:"order_id"`
		AmountCents int64  `db:"amount_cents"`
		RunID       int64  `db:"run_id"`
		CallID      string `db:"call_id"`
	}
	if err := s.DB().GetContext(ctx, &got, `SELECT order_id, amount_cents, run_id, call_id FROM demo_refunds WHERE id = ?`, second); err != nil {
		t.Fatal(err)
	}
	if got.OrderID != r.OrderID || got.AmountCents != r.AmountCents || got.RunID != r.RunID || got.CallID != r.CallID {
		t.Errorf("stored refund = %+v, want %+v", got, r)
	}
	tests := []struct {
		orderID string
		want    int
	}{
		{"ORD-1001", 2},
		{"ORD-1002", 0},
		{"ORD-NONE", 0},
	}
	for _, tt := range tests {
		n, err := s.RefundCount(ctx, tt.orderID)
		if err != nil {
			t.Fatalf("RefundCount(%q): %v", tt.orderID, err)
		}
		if n != tt.want {
			t.Errorf("RefundCount(%q) = %d, want %d", tt.orderID, n, tt.want)
		}
	}
}

// TestRefundToolOnMySQL runs the real refund_order tool against the store:
// every execution is one more row, as the exactly-once tests rely on.
func TestRefundToolOnMySQL(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.SeedDemoOrders(ctx, seedOrders); err != nil {
		t.Fatal(err)
	}
	tools := builtin.Registry(builtin.Tools(s)...)
	lookup, refund := tools[builtin.NameLookupOrder], tools[builtin.NameRefundOrder]

	got, err := lookup.Call(ctx, runtime.Invocation{Arguments: []byte(`{"order_id":"ORD-1002"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"order_id":"ORD-1002","customer":"Alan Turing","amount_cents":12900,"currency":"EUR"}`; got != want {
		t.Errorf("lookup_order = %s, want %s", got, want)
	}
	if _, err := lookup.Call(ctx, runtime.Invocation{Arguments: []byte(`{"order_id":"ORD-0"}`)}); err == nil || err.Error() != "order ORD-0 not found" {
		t.Errorf("lookup_order of an unknown order: error = %v, want %q", err, "order ORD-0 not found")
	}

	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			inv := runtime.Invocation{RunID: 1, CallID: "call-same", Arguments: []byte(`{"order_id":"ORD-1002","amount_cents":100}`)}
			if _, err := refund.Call(ctx, inv); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("refund_order: %v", err)
	}
	count, err := s.RefundCount(ctx, "ORD-1002")
	if err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Errorf("RefundCount = %d after %d executions, want %d", count, n, n)
	}
}
