package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// delivery is an outbox row as a test writes it, standing in for the
// delivery code: status, attempts, the last answer, and how old it is.
type delivery struct {
	run        int64
	event      string
	status     string
	attempts   int
	lastStatus any // nil: no answer
	lastError  any
	age        time.Duration
}

func insertDelivery(t *testing.T, db *sqlx.DB, d delivery) int64 {
	t.Helper()
	res, err := db.Exec(`INSERT INTO webhook_deliveries (webhook_id, run_id, configuration_id, event, url, secret_env,
			body, status, attempts, next_attempt_at, last_status, last_error, created_at, delivered_at)
		VALUES (CONCAT('msg_', REPLACE(UUID(), '-', '')), ?, 1, ?, CONCAT('https://hooks.example.com/', ?), 'HOOK_SECRET',
			'{"type":"x"}', ?, ?, NOW(6) + INTERVAL 1 HOUR, ?, ?,
			NOW(6) - INTERVAL ? MICROSECOND, IF(? = 'delivered', NOW(6), NULL))`,
		d.run, d.event, d.run, d.status, d.attempts, d.lastStatus, d.lastError, d.age.Microseconds(), d.status)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return id
}

func TestListAndRetryDeliveries(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()

	delivered := insertDelivery(t, db, delivery{run: 1, event: runtime.EventRunWaiting, status: "delivered", attempts: 1, lastStatus: 204, age: time.Hour})
	failed := insertDelivery(t, db, delivery{run: 1, event: runtime.EventRunSettled, status: "failed", attempts: 17,
		lastStatus: 503, lastError: "503 Service Unavailable", age: 25 * time.Hour})
	timedOut := insertDelivery(t, db, delivery{run: 2, event: runtime.EventRunWaiting, status: "failed", attempts: 17,
		lastError: "context deadline exceeded (10s)", age: 30 * time.Hour})
	pending := insertDelivery(t, db, delivery{run: 2, event: runtime.EventRunSettled, status: "pending", attempts: 2, lastStatus: 500, age: time.Minute})

	all, err := st.ListDeliveries(ctx, false, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(all), []int64{pending, timedOut, failed, delivered}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("all deliveries = %v, want %v (newest first)", got, want)
	}
	onlyFailed, err := st.ListDeliveries(ctx, true, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(onlyFailed), []int64{timedOut, failed}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("failed deliveries = %v, want %v", got, want)
	}
	if got, err := st.ListDeliveries(ctx, false, 2); err != nil || len(got) != 2 || got[0].ID != pending {
		t.Errorf("limit 2 = %v, %v; want the two newest", ids(got), err)
	}
	if _, err := st.ListDeliveries(ctx, false, 0); err == nil {
		t.Error("limit 0 is no error")
	}
	f := onlyFailed[1]
	if f.RunID != 1 || f.Event != runtime.EventRunSettled || f.URL != "https://hooks.example.com/1" || f.Attempts != 17 ||
		f.LastStatus != 503 || f.LastError != "503 Service Unavailable" || f.DeliveredAt != nil || !strings.HasPrefix(f.WebhookID, "msg_") {
		t.Errorf("failed delivery reads %+v", f)
	}
	if to := onlyFailed[0]; to.LastStatus != 0 || to.LastError == "" {
		t.Errorf("a delivery nobody answered reads last status %d, error %q", to.LastStatus, to.LastError)
	}
	if d := all[3]; d.DeliveredAt == nil || d.Status != "delivered" {
		t.Errorf("the delivered one reads %+v", d)
	}

	// Of a run: its failed ones only, oldest first.
	ofRun, err := st.FailedDeliveriesOfRun(ctx, 1)
	if err != nil || fmt.Sprint(ids(ofRun)) != fmt.Sprint([]int64{failed}) {
		t.Errorf("failed deliveries of run 1 = %v, %v; want [%d]", ids(ofRun), err, failed)
	}
	if none, err := st.FailedDeliveriesOfRun(ctx, 99); err != nil || none == nil || len(none) != 0 {
		t.Errorf("failed deliveries of a run without any = %#v, %v; want an empty list", none, err)
	}

	// Retry: failed -> pending, due now, attempts kept.
	if err := st.RetryDelivery(ctx, failed); err != nil {
		t.Fatal(err)
	}
	var row struct {
		Status   string `db:"status"`
		Attempts int    `db:"attempts"`
		Due      bool   `db:"due"`
	}
	if err := db.Get(&row, `SELECT status, attempts, next_attempt_at <= NOW(6) AS due FROM webhook_deliveries WHERE id = ?`, failed); err != nil {
		t.Fatal(err)
	}
	if row.Status != "pending" || row.Attempts != 17 || !row.Due {
		t.Errorf("after a retry the row is %+v, want pending, 17 attempts, due now", row)
	}
	if ofRun, _ := st.FailedDeliveriesOfRun(ctx, 1); len(ofRun) != 0 {
		t.Errorf("run 1 still shows %d failed deliveries after the retry", len(ofRun))
	}

	// Refusals write nothing and say why.
	before := snapshotDeliveries(t, db)
	for _, tc := range []struct {
		id   int64
		want error
		says string
	}{
		{failed, runtime.ErrDeliveryNotFailed, fmt.Sprintf("delivery %d is pending, not failed", failed)},
		{pending, runtime.ErrDeliveryNotFailed, fmt.Sprintf("delivery %d is pending, not failed", pending)},
		{delivered, runtime.ErrDeliveryNotFailed, fmt.Sprintf("delivery %d is delivered, not failed", delivered)},
		{9999, runtime.ErrNotFound, "retry delivery 9999"},
	} {
		err := st.RetryDelivery(ctx, tc.id)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("retry of %d = %v, want %v saying %q", tc.id, err, tc.want, tc.says)
		}
	}
	if after := snapshotDeliveries(t, db); after != before {
		t.Errorf("a refused retry changed the table:\n%s\n%s", before, after)
	}
}

func TestOldestPendingAge(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	if age, ok, err := st.OldestPendingAge(ctx); err != nil || ok || age != 0 {
		t.Errorf("empty outbox: %v, %v, %v; want 0, false, nil", age, ok, err)
	}
	insertDelivery(t, db, delivery{run: 1, event: runtime.EventRunWaiting, status: "failed", age: 48 * time.Hour})
	insertDelivery(t, db, delivery{run: 1, event: runtime.EventRunWaiting, status: "delivered", age: 10 * time.Hour})
	if _, ok, err := st.OldestPendingAge(ctx); err != nil || ok {
		t.Errorf("no pending delivery: ok %v, %v", ok, err)
	}
	insertDelivery(t, db, delivery{run: 1, event: runtime.EventRunSettled, status: "pending", age: 90 * time.Second})
	insertDelivery(t, db, delivery{run: 2, event: runtime.EventRunWaiting, status: "pending", age: 5 * time.Second})
	age, ok, err := st.OldestPendingAge(ctx)
	if err != nil || !ok || age < 90*time.Second || age > 100*time.Second {
		t.Errorf("oldest pending = %v, %v, %v; want about 90 s", age, ok, err)
	}
}

func ids(ds []runtime.DeliveryInfo) []int64 {
	out := []int64{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// snapshotDeliveries is every row's mutable part, as text.
func snapshotDeliveries(t *testing.T, db *sqlx.DB) string {
	t.Helper()
	var rows []string
	if err := db.Select(&rows, `SELECT CONCAT_WS('/', id, status, attempts, next_attempt_at) FROM webhook_deliveries ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	return strings.Join(rows, "\n")
}
