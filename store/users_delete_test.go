package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// TestDeleteUserTakesEveryUnsettledRunAlong: the deletion must name every
// unsettled run of the user in the status it has under the deletion's
// locks; one that does not (a run it missed, or one that moved since it
// was read) is ErrClaimLost with nothing written. Named right, a queued
// run is settled as owner_deleted and a running one flagged for its
// holder, in the commit that deletes the user; settled runs stay as they
// are.
func TestDeleteUserTakesEveryUnsettledRunAlong(t *testing.T) {
	db, _ := dbtest.New(t)
	s := store.New(db)
	ctx := context.Background()
	u := createUser(t, s, runtime.User{Name: "leaving"})
	run := func(status runtime.Status) int64 {
		t.Helper()
		r := &runtime.Run{ConfigurationID: 1, OwnerID: u.ID, Origin: runtime.OriginInteractive, Status: status,
			State: []byte(`{}`), Prompt: "p"}
		lease := time.Duration(0)
		if status == runtime.StatusRunning {
			r.ClaimedBy, lease = "holder", time.Minute
		}
		if err := s.CreateRun(ctx, r, lease, asStored(r)); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	queued, running, settled := run(runtime.StatusQueued), run(runtime.StatusRunning), run(runtime.StatusQueued)
	if _, err := db.Exec(`UPDATE runs SET status = 'completed', termination_reason = 'completed' WHERE id = ?`, settled); err != nil {
		t.Fatal(err)
	}

	got, err := s.UnsettledRuns(ctx, u.ID)
	if err != nil || len(got) != 2 || got[0].ID != queued || got[0].Status != runtime.StatusQueued ||
		got[1].ID != running || got[1].Status != runtime.StatusRunning {
		t.Fatalf("UnsettledRuns = %+v, %v; want the queued and the running run, by id", got, err)
	}
	settle := runtime.Event{Seq: 1, Kind: runtime.KindSettle, Payload: []byte(`{"reason":"owner_deleted"}`)}
	right := []runtime.OwnedRun{{ID: queued, Status: runtime.StatusQueued, Events: []runtime.Event{settle}},
		{ID: running, Status: runtime.StatusRunning}}
	for name, runs := range map[string][]runtime.OwnedRun{
		"none":         nil,
		"one missing":  right[:1],
		"a status off": {right[0], {ID: running, Status: runtime.StatusDecided}},
		"a stranger's": {right[0], right[1], {ID: settled, Status: runtime.StatusQueued}},
	} {
		if _, err := s.DeleteUser(ctx, runtime.UserDeletion{UserID: u.ID, Runs: runs}); !errors.Is(err, runtime.ErrClaimLost) {
			t.Errorf("a deletion naming %s: %v, want ErrClaimLost", name, err)
		}
		if _, err := s.User(ctx, u.ID); err != nil {
			t.Errorf("the user after a refused deletion (%s): %v", name, err)
		}
	}
	if n := countRows(t, db, `SELECT COUNT(*) FROM run_events`); n != 0 {
		t.Errorf("refused deletions wrote %d events", n)
	}

	// The running run's credential, and another user's, which stays.
	cred, err := s.MintRunToken(ctx, running, u.ID, "holder", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stays := createUser(t, s, runtime.User{Name: "staying"})
	if _, err := s.MintRunToken(ctx, settled+1000, stays.ID, "other", time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, db, fmt.Sprintf(`SELECT COUNT(*) FROM run_tokens WHERE owner_id = %d`, u.ID)); n != 1 {
		t.Fatalf("refused deletions left %d of the user's run credentials, want 1", n)
	}
	if _, err := s.DeleteUser(ctx, runtime.UserDeletion{UserID: u.ID, Runs: right}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IntrospectRunToken(ctx, cred); !errors.Is(err, runtime.ErrTokenInvalid) {
		t.Errorf("a deleted user's run credential introspects as %v, want inactive", err)
	}
	if n := countRows(t, db, `SELECT COUNT(*) FROM run_tokens`); n != 1 {
		t.Errorf("%d run credentials after the deletion, want only the other user's", n)
	}
	if r, err := s.Run(ctx, queued); err != nil || r.Status != runtime.StatusCancelled || r.TerminationReason != runtime.ReasonOwnerDeleted {
		t.Errorf("the queued run = %+v, %v; want cancelled, owner_deleted", r, err)
	}
	if r, err := s.Run(ctx, running); err != nil || r.Status != runtime.StatusRunning || !r.CancelRequested {
		t.Errorf("the running run = %+v, %v; want still running, its cancel requested", r, err)
	}
	if r, err := s.Run(ctx, settled); err != nil || r.Status != runtime.StatusCompleted {
		t.Errorf("the settled run = %+v, %v; want it left completed", r, err)
	}
	for _, id := range []int64{queued, running} {
		if gone, err := s.OwnerDeleted(ctx, id); err != nil || !gone {
			t.Errorf("OwnerDeleted(%d) = %v, %v; want true", id, gone, err)
		}
	}
	if err := s.MarkPendingEffect(ctx, running, "holder", "call_1", time.Minute); !errors.Is(err, runtime.ErrCancelRequested) {
		t.Errorf("stamping a write of the flagged run: %v, want ErrCancelRequested", err)
	}
	if err := s.MarkPendingEffect(ctx, running, "thief", "call_1", time.Minute); !errors.Is(err, runtime.ErrLeaseLost) {
		t.Errorf("stamping a write of someone else's run: %v, want ErrLeaseLost", err)
	}
}

func countRows(t *testing.T, db interface {
	Get(dest any, query string, args ...any) error
}, query string) int {
	t.Helper()
	var n int
	if err := db.Get(&n, query); err != nil {
		t.Fatal(err)
	}
	return n
}
