package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// TestCancelsRequestedListsTheFlaggedRunningRuns: of 1,000 running runs,
// the two whose cancel was requested are listed with their holders; a
// flagged run that settled meanwhile is not, and the read goes by the
// index runs_cancel_requested, reading only the flagged rows.
func TestCancelsRequestedListsTheFlaggedRunningRuns(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	if _, err := db.Exec(`INSERT INTO runs (configuration_id, owner_id, status, state, claimed_by, lease_expires_at, prompt)
		WITH RECURSIVE n AS (SELECT 1 AS i UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
		SELECT 1, 1, 'running', '{}', CONCAT('holder-', i), NOW(6) + INTERVAL 1 MINUTE, 'p' FROM n`); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{7, 700, 701} {
		if err := st.RequestCancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`UPDATE runs SET status = 'cancelled', claimed_by = NULL WHERE id = 701`); err != nil {
		t.Fatal(err)
	}
	got, err := st.CancelsRequested(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b runtime.Lease) int { return int(a.RunID - b.RunID) })
	if want := []runtime.Lease{{RunID: 7, ClaimedBy: "holder-7"}, {RunID: 700, ClaimedBy: "holder-700"}}; !slices.Equal(got, want) {
		t.Errorf("CancelsRequested = %v, want %v", got, want)
	}
	var plan []struct {
		Key  *string `db:"key"`
		Rows *int64  `db:"rows"`
	}
	if err := db.Unsafe().Select(&plan, `EXPLAIN SELECT id, claimed_by FROM runs FORCE INDEX (runs_cancel_requested)
		WHERE status = 'running' AND cancel_requested = 1`); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 || plan[0].Key == nil || *plan[0].Key != "runs_cancel_requested" || plan[0].Rows == nil || *plan[0].Rows > 10 {
		t.Errorf("the read's plan is %+v, want the index runs_cancel_requested over a few rows", plan)
	}
}
