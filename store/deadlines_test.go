package store_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// TestExpiredPausesUseTheDeadlineIndex: among many waiting runs without a
// deadline, the sweep finds the expired ones, longest expired first, by
// the deadline index (EXPLAIN's key, which MySQL and MariaDB both report).
func TestExpiredPausesUseTheDeadlineIndex(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	insert := func(status, deadline string) int64 {
		t.Helper()
		res, err := db.Exec(`INSERT INTO runs (configuration_id, owner_id, status, turn_digest, state, prompt,
			waiting_since, decision_deadline) VALUES (1, 1, ?, REPEAT('a', 64), '{}', 'p', NOW(6), `+deadline+`)`, status)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		return id
	}
	for range 400 {
		insert("waiting_for_approval", "NULL")
	}
	insert("waiting_for_input", "NOW(6) + INTERVAL 1 HOUR")
	insert("completed", "NOW(6) - INTERVAL 9 HOUR") // not waiting: never swept
	var want []int64
	for i := range 3 {
		want = append(want, insert("waiting_for_approval", fmt.Sprintf("NOW(6) - INTERVAL %d MINUTE", 3-i)))
	}
	want = append(want, insert("waiting_for_input", "NOW(6) - INTERVAL 1 SECOND"))
	if _, err := db.Exec(`ANALYZE TABLE runs`); err != nil {
		t.Fatal(err)
	}

	got, err := st.ExpiredPauses(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("expired pauses = %v, want %v (longest expired first)", got, want)
	}
	if got, err := st.ExpiredPauses(ctx, 2); err != nil || !slices.Equal(got, want[:2]) {
		t.Errorf("expired pauses, limit 2 = %v, %v; want %v", got, err, want[:2])
	}

	rows, err := db.Queryx("EXPLAIN "+store.ExpiredPausesQuery, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		row := map[string]any{}
		if err := rows.MapScan(row); err != nil {
			t.Fatal(err)
		}
		for k, v := range row {
			if strings.EqualFold(k, "key") {
				b, _ := v.([]byte)
				keys = append(keys, string(b))
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"runs_decision_deadline"}) {
		t.Errorf("EXPLAIN of the sweep uses keys %q, want runs_decision_deadline", keys)
	}
}

// TestSuspensionSetsTheDeadline: a suspension with a timeout sets the
// deadline that long after the pause began, on the database's clock; one
// without sets none; a cancel clears it.
func TestSuspensionSetsTheDeadline(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	suspend := func(timeout time.Duration) *runtime.Run {
		t.Helper()
		r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
			Status: runtime.StatusRunning, State: []byte(`{}`), ClaimedBy: "holder", Prompt: "p"}
		if err := st.CreateRun(ctx, r, time.Minute, asStored(r)); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Commit(ctx, runtime.Commit{RunID: r.ID, ClaimedBy: "holder", Lease: time.Minute,
			Event:  runtime.Event{Seq: 1, Kind: runtime.KindSuspend, Payload: []byte(`{}`)},
			Status: runtime.StatusWaitingForApproval, TurnDigest: strings.Repeat("b", 64), DecisionTimeout: timeout}); err != nil {
			t.Fatal(err)
		}
		got, err := st.Run(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	r := suspend(90 * time.Minute)
	if r.DecisionDeadline == nil || r.WaitingSince == nil || r.DecisionDeadline.Sub(*r.WaitingSince) != 90*time.Minute {
		t.Errorf("deadline %v since %v, want 90m after the pause began", r.DecisionDeadline, r.WaitingSince)
	}
	if err := st.CancelIdle(ctx, r.ID, runtime.StatusWaitingForApproval, nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Run(ctx, r.ID); got.DecisionDeadline != nil {
		t.Errorf("cancelled run keeps deadline %v", got.DecisionDeadline)
	}
	if r := suspend(0); r.DecisionDeadline != nil {
		t.Errorf("pause without a timeout has deadline %v", r.DecisionDeadline)
	}
}
