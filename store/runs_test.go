package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// counts is how many rows a run has in the tables a step writes.
func counts(t *testing.T, st *store.Store, runID int64) (events, messages int) {
	t.Helper()
	evs, err := st.Events(context.Background(), runID, 0)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Resume(context.Background(), runID, true)
	if err != nil {
		t.Fatal(err)
	}
	return len(evs), len(res.Messages)
}

// asStored is CreateRun's content of a run whose state and prompt are
// set on it as they are to be stored, with these first messages.
func asStored(r *runtime.Run, messages ...[]byte) func(int64) (runtime.NewRunContent, error) {
	c := runtime.NewRunContent{State: r.State, Prompt: r.Prompt, Messages: messages}
	return func(int64) (runtime.NewRunContent, error) { return c, nil }
}

// TestCommitWritesOnlyForTheHolder checks the guard of every write a step
// carries: the holder's step writes its event and all its messages and
// keeps the stored state when it sends none; a step of a holder that lost
// the run writes nothing at all, whichever way its script guards the writes.
func TestCommitWritesOnlyForTheHolder(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
		Status: runtime.StatusRunning, State: []byte(`{"iterations":1}`), ClaimedBy: "holder", Prompt: "p"}
	if err := st.CreateRun(ctx, r, time.Minute, asStored(r, []byte(`{"role":"user"}`))); err != nil {
		t.Fatal(err)
	}
	step := func(by string, seq int, edit func(*runtime.Commit)) (bool, error) {
		c := runtime.Commit{RunID: r.ID, ClaimedBy: by, Lease: time.Minute, Status: runtime.StatusRunning,
			Event:        runtime.Event{Seq: seq, Kind: runtime.KindTool, Payload: []byte(`{}`)},
			Messages:     [][]byte{[]byte(`{"role":"tool","n":1}`), []byte(`{"role":"tool","n":2}`)},
			FirstMessage: 1 + 2*(seq-1)}
		if edit != nil {
			edit(&c)
		}
		return st.Commit(ctx, c)
	}

	if _, err := step("holder", 1, nil); err != nil {
		t.Fatal(err)
	}
	if evs, msgs := counts(t, st, r.ID); evs != 1 || msgs != 3 {
		t.Fatalf("after the holder's step: %d events, %d messages; want 1 and 3", evs, msgs)
	}
	got, err := st.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.State) != `{"iterations":1}` {
		t.Errorf("a step without a state replaced the stored one with %q", got.State)
	}

	for name, edit := range map[string]func(*runtime.Commit){
		"plain step":   nil,
		"with outcome": func(c *runtime.Commit) { c.Outcome, c.OutcomeDigest = "completed", "d" },
		"settle": func(c *runtime.Commit) {
			c.Status, c.TerminationReason, c.State = runtime.StatusCompleted, "completed", []byte(`{"x":1}`)
		},
	} {
		_, err := step("intruder", 2, edit)
		if !errors.Is(err, runtime.ErrLeaseLost) {
			t.Errorf("%s by a non-holder: err = %v, want ErrLeaseLost", name, err)
		}
		if evs, msgs := counts(t, st, r.ID); evs != 1 || msgs != 3 {
			t.Errorf("%s by a non-holder wrote: %d events, %d messages; want 1 and 3", name, evs, msgs)
		}
	}
	got, err = st.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runtime.StatusRunning || got.ClaimedBy != "holder" || string(got.State) != `{"iterations":1}` {
		t.Errorf("non-holders changed the run: %s by %q, state %q", got.Status, got.ClaimedBy, got.State)
	}
}

// TestCommitOfASuspensionMeetsACancel checks the cancel guard of a
// suspension: the holder's step that would pause a run whose cancel was
// requested writes nothing and says so with ErrCancelRequested, and the
// run is still the holder's to cancel.
func TestCommitOfASuspensionMeetsACancel(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
		Status: runtime.StatusRunning, State: []byte(`{}`), ClaimedBy: "holder", Prompt: "p"}
	if err := st.CreateRun(ctx, r, time.Minute, asStored(r, []byte(`{"role":"user"}`))); err != nil {
		t.Fatal(err)
	}
	if err := st.RequestCancel(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	cancel, err := st.Commit(ctx, runtime.Commit{RunID: r.ID, ClaimedBy: "holder", Lease: time.Minute,
		Status: runtime.StatusWaitingForApproval, TurnDigest: "d",
		Event:    runtime.Event{Seq: 1, Kind: runtime.KindSuspend, Payload: []byte(`{}`)},
		Messages: [][]byte{[]byte(`{"role":"assistant"}`)}, FirstMessage: 1})
	if !errors.Is(err, runtime.ErrCancelRequested) || !cancel {
		t.Fatalf("suspension of a cancelled run = %v, %v; want true, ErrCancelRequested", cancel, err)
	}
	if evs, msgs := counts(t, st, r.ID); evs != 0 || msgs != 1 {
		t.Errorf("the refused suspension wrote: %d events, %d messages; want 0 and 1", evs, msgs)
	}
	got, err := st.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != runtime.StatusRunning || got.ClaimedBy != "holder" {
		t.Errorf("after the refused suspension the run is %s by %q, want running by holder", got.Status, got.ClaimedBy)
	}
}

// TestResumeReadsEveryPart checks the one query a continuation starts
// with: the last seq, the transcript in order (only when asked for) and the
// standing approvals, each told apart from the others.
func TestResumeReadsEveryPart(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
		Status: runtime.StatusRunning, State: []byte(`{}`), ClaimedBy: "holder", Prompt: "p"}
	msgs := [][]byte{[]byte(`{"n":0}`), []byte(`{"n":1}`), []byte(`{"n":2}`)}
	if err := st.CreateRun(ctx, r, time.Minute, asStored(r, msgs...)); err != nil {
		t.Fatal(err)
	}
	for seq := 1; seq <= 2; seq++ {
		if _, err := st.Commit(ctx, runtime.Commit{RunID: r.ID, ClaimedBy: "holder", Lease: time.Minute,
			Event: runtime.Event{Seq: seq, Kind: runtime.KindTool, Payload: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(`INSERT INTO standing_approvals (run_id, tool_name, granted_by) VALUES (?, 'refund_order', 1), (?, 'a_tool', 1)`, r.ID, r.ID); err != nil {
		t.Fatal(err)
	}
	got, err := st.Resume(ctx, r.ID, true)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastSeq != 2 || len(got.Messages) != 3 || len(got.Standing) != 2 {
		t.Fatalf("Resume = seq %d, %d messages, standing %q; want 2, 3, two tools", got.LastSeq, len(got.Messages), got.Standing)
	}
	for i, m := range got.Messages {
		if want := fmt.Sprintf(`{"n":%d}`, i); string(m) != want {
			t.Errorf("message %d = %s, want %s", i, m, want)
		}
	}
	if !slices.Contains(got.Standing, "refund_order") || !slices.Contains(got.Standing, "a_tool") {
		t.Errorf("standing = %q, want refund_order and a_tool", got.Standing)
	}
	without, err := st.Resume(ctx, r.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if without.LastSeq != 2 || without.Messages != nil || len(without.Standing) != 2 {
		t.Errorf("Resume without messages = %+v", without)
	}
}

// TestClaimWritesOnlyForTheWinner checks the guard of the claim's writes:
// a claim on a stale digest records no decision and grants no standing
// approval; the winning one records its decision and every tool once.
func TestClaimWritesOnlyForTheWinner(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
		Status: runtime.StatusWaitingForApproval, State: []byte(`{}`), Prompt: "p"}
	if err := st.CreateRun(ctx, r, time.Minute, asStored(r)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE runs SET turn_digest = 'current' WHERE id = ?`, r.ID); err != nil {
		t.Fatal(err)
	}
	claim := func(digest string) error {
		return st.Claim(ctx, runtime.Claim{RunID: r.ID, From: runtime.StatusWaitingForApproval,
			To: runtime.StatusDecided, Digest: digest, Standing: []string{"refund_order", "a_tool", "refund_order"},
			Decision: runtime.DecisionRecord{Kind: runtime.DecisionApprove, Scope: runtime.ScopeSession,
				DecidedBy: 1, Path: runtime.PathDurable}})
	}
	rows := func() (decisions, standing int) {
		t.Helper()
		if err := db.Get(&decisions, `SELECT COUNT(*) FROM decisions WHERE run_id = ?`, r.ID); err != nil {
			t.Fatal(err)
		}
		if err := db.Get(&standing, `SELECT COUNT(*) FROM standing_approvals WHERE run_id = ?`, r.ID); err != nil {
			t.Fatal(err)
		}
		return decisions, standing
	}
	if err := claim("stale"); !errors.Is(err, runtime.ErrClaimLost) {
		t.Fatalf("claim on a stale digest: err = %v, want ErrClaimLost", err)
	}
	if d, s := rows(); d != 0 || s != 0 {
		t.Fatalf("the lost claim wrote %d decisions and %d standing approvals", d, s)
	}
	if err := claim("current"); err != nil {
		t.Fatal(err)
	}
	if d, s := rows(); d != 1 || s != 2 {
		t.Fatalf("the won claim wrote %d decisions and %d standing approvals, want 1 and 2", d, s)
	}
}

// TestRenewLeasesKeepsOnlyHeldClaims renews 600 leases (two batches): the
// runs still held under the claim named get a later expiry; one taken over
// by another holder and one settled are reported lost and left alone.
func TestRenewLeasesKeepsOnlyHeldClaims(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	if _, err := db.Exec(`INSERT INTO runs (configuration_id, owner_id, status, state, claimed_by, lease_expires_at, prompt)
		WITH RECURSIVE n AS (SELECT 1 AS i UNION ALL SELECT i + 1 FROM n WHERE i < 600)
		SELECT 1, 1, 'running', '{}', CONCAT('holder-', i), NOW(6) + INTERVAL 1 SECOND, 'p' FROM n`); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if err := db.Select(&ids, `SELECT id FROM runs ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	held := make([]runtime.Lease, len(ids))
	for i, id := range ids {
		held[i] = runtime.Lease{RunID: id, ClaimedBy: fmt.Sprintf("holder-%d", i+1)}
	}
	takenOver, settled := ids[10], ids[550]
	if _, err := db.Exec(`UPDATE runs SET claimed_by = 'worker' WHERE id = ?`, takenOver); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE runs SET status = 'completed', claimed_by = NULL WHERE id = ?`, settled); err != nil {
		t.Fatal(err)
	}
	lost, err := st.RenewLeases(ctx, held, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lost)
	if !slices.Equal(lost, []int64{takenOver, settled}) {
		t.Errorf("lost = %v, want [%d %d]", lost, takenOver, settled)
	}
	var renewed, untouched int
	if err := db.Get(&renewed, `SELECT COUNT(*) FROM runs WHERE lease_expires_at > NOW(6) + INTERVAL 50 MINUTE`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&untouched, `SELECT COUNT(*) FROM runs WHERE id IN (?, ?) AND lease_expires_at < NOW(6) + INTERVAL 1 MINUTE`, takenOver, settled); err != nil {
		t.Fatal(err)
	}
	if renewed != 598 || untouched != 2 {
		t.Errorf("%d leases renewed and %d lost ones untouched, want 598 and 2", renewed, untouched)
	}
}

// On a single server there is no cluster to wait for: SyncReads opens no
// pool, and RunSynced reads what Run reads.
func TestSyncReadsOnASingleServerOpensNothing(t *testing.T) {
	db, dsn := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	synced, err := st.SyncReads(ctx, dsn)
	if err != nil || synced != nil {
		t.Fatalf("SyncReads on a single server = %v, %v; want no pool and no error", synced, err)
	}
	r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
		Status: runtime.StatusRunning, State: []byte(`{}`), ClaimedBy: "t", Prompt: "p"}
	if err := st.CreateRun(ctx, r, time.Minute, asStored(r)); err != nil {
		t.Fatal(err)
	}
	got, err := st.RunSynced(ctx, r.ID)
	if err != nil || got.ID != r.ID || got.Status != runtime.StatusRunning || got.ClaimedBy != "t" {
		t.Fatalf("RunSynced(%d) = %+v, %v; want the run", r.ID, got, err)
	}
	if _, err := st.RunSynced(ctx, r.ID+1000); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("RunSynced of no run = %v, want ErrNotFound", err)
	}
}
