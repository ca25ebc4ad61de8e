package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// changesOf is the change log of one run, oldest first, as "kind:status"
// (and the decider for a decision).
func changesOf(t *testing.T, w *testrig.World, runID int64) []string {
	t.Helper()
	cs, err := w.Store.Changes(context.Background(), runtime.ChangeQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		if c.RunID != runID {
			continue
		}
		s := string(c.Change) + ":" + string(c.Status)
		if c.DecidedBy != "" {
			s += ":" + c.Decision + " by " + c.DecidedBy
		}
		out = append(out, s)
	}
	return out
}

// Every step that changes what a card shows writes its change in its own
// commit: the run's start, its pause, the claim that decides it, its
// settling and its erasure; a claim that loses writes none.
func TestChangeLogFollowsARunsLife(t *testing.T) {
	w := testrig.New(t, testrig.Configs(bulkYAML))
	ctx := context.Background()
	paused, _ := w.Waiting(t, "refund")
	w.Approve(t, paused)
	if err := w.Store.Claim(ctx, runtime.Claim{RunID: paused.RunID, From: runtime.StatusWaitingForApproval, Digest: paused.Digest,
		To: runtime.StatusDecided, Decision: runtime.DecisionRecord{Kind: runtime.DecisionApprove, Scope: runtime.ScopeOnce,
			DecidedBy: w.Actor("approver").ID, Path: runtime.PathDurable}}); err == nil {
		t.Fatal("a second claim of a decided turn won")
	}
	if _, err := w.Engine.Erase(ctx, paused.RunID, w.Actor("owner")); err != nil {
		t.Fatal(err)
	}
	got := changesOf(t, w, paused.RunID)
	want := []string{"started:running", "waiting:waiting_for_approval", "decided:running:approve by approver",
		"settled:completed", "erased:completed"}
	if !slices.Equal(got, want) {
		t.Fatalf("changes = %q, want %q", got, want)
	}
}

// A bulk's claims write one change each, in the chunk's transaction; an
// idle run's cancel writes its settling.
func TestChangeLogOfBulkClaimsAndCancels(t *testing.T) {
	w := testrig.New(t, testrig.Configs(bulkYAML))
	ctx := context.Background()
	approver := w.Actor("approver")
	var claims []runtime.Claim
	var runs []runtime.Outcome
	for range 3 {
		out, _ := w.Waiting(t, "refund")
		runs = append(runs, out)
		claims = append(claims, runtime.Claim{RunID: out.RunID, From: runtime.StatusWaitingForApproval, Digest: out.Digest,
			To: runtime.StatusDecided, Decision: runtime.DecisionRecord{Kind: runtime.DecisionDeny, Scope: runtime.ScopeOnce,
				Tools: "refund_order", DecidedBy: approver.ID, Path: runtime.PathDurable}})
	}
	for i, err := range w.Store.ClaimMany(ctx, claims[:2]) {
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	for _, out := range runs[:2] {
		if got := changesOf(t, w, out.RunID); len(got) != 3 || got[2] != "decided:decided:deny by approver" {
			t.Fatalf("run %d: changes = %q, want a decision by approver last", out.RunID, got)
		}
	}
	if _, err := w.Engine.Cancel(ctx, runs[2].RunID, w.Actor("owner")); err != nil {
		t.Fatal(err)
	}
	if got := changesOf(t, w, runs[2].RunID); len(got) != 3 || got[2] != "settled:cancelled" {
		t.Fatalf("cancelled run: changes = %q, want settled:cancelled last", got)
	}
}

// nextChanges waits for the watch's next lines.
func nextChanges(t *testing.T, fw *runtime.ChangeWatch) []runtime.FeedLine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lines, err := fw.Next(ctx)
	if err != nil {
		t.Fatalf("no changes within 10s: %v", err)
	}
	return lines
}

// A change whose id was allocated before another's but committed after it
// (AUTO_INCREMENT ids are handed out at the INSERT) still reaches every
// client: the poller keeps asking for the id it skipped. A client that
// resumes from the cursor of the later change gets the earlier one too.
func TestChangeFeedWaitsForALateCommit(t *testing.T) {
	w := testrig.New(t, testrig.Configs(bulkYAML))
	ctx := context.Background()
	paused, _ := w.Waiting(t, "refund")
	fw, err := w.Engine.WatchChanges(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()

	late, err := w.DB.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Rollback()
	res, err := late.Exec(`INSERT INTO run_changes (run_id, change_kind, status) VALUES (?, 'settled', 'completed')`, paused.RunID)
	if err != nil {
		t.Fatal(err)
	}
	lateID, _ := res.LastInsertId()

	other, _ := w.Waiting(t, "refund")
	var seen []int64
	var cursor runtime.FeedCursor
	for len(seen) < 2 {
		for _, l := range nextChanges(t, fw) {
			if l.Change.RunID != other.RunID {
				t.Fatalf("got %+v before the late commit, want only run %d's changes", l.Change, other.RunID)
			}
			seen = append(seen, l.Change.ID)
			cursor = l.Cursor
		}
	}
	if seen[0] <= lateID {
		t.Fatalf("ids %v, want them above the late one (%d)", seen, lateID)
	}
	if cursor.Pos >= lateID {
		t.Fatalf("cursor %s after the skipped id %d: a client resuming from it would miss it", cursor, lateID)
	}
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := nextChanges(t, fw); len(got) != 1 || got[0].Change.ID != lateID || got[0].Change.Change != runtime.ChangeSettled {
		t.Fatalf("after the late commit: %+v, want change %d", got, lateID)
	}

	resumed, err := w.Engine.WatchChanges(ctx, &cursor)
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	ids := map[int64]bool{}
	for !ids[lateID] {
		for _, l := range nextChanges(t, resumed) {
			ids[l.Change.ID] = true
		}
	}
}

// The workers' sweep deletes the change log's rows older than its
// retention, and only those.
func TestDeleteOldChanges(t *testing.T) {
	w := testrig.New(t, testrig.Configs(bulkYAML))
	ctx := context.Background()
	paused, _ := w.Waiting(t, "refund")
	if _, err := w.DB.Exec(`INSERT INTO run_changes (run_id, change_kind, status, created_at)
		VALUES (?, 'started', 'running', NOW(6) - INTERVAL 25 HOUR)`, paused.RunID); err != nil {
		t.Fatal(err)
	}
	n, err := w.Store.DeleteOldChanges(ctx, 100)
	if err != nil || n != 1 {
		t.Fatalf("DeleteOldChanges = %d, %v; want the one row older than a day", n, err)
	}
	if got := changesOf(t, w, paused.RunID); len(got) != 2 {
		t.Fatalf("changes left = %q, want the run's two of today", got)
	}
}

// A hundred clients of one process cost one poll per interval between
// them, and none once the last has gone.
func TestChangeFeedIsOnePollForEveryClient(t *testing.T) {
	w := testrig.New(t, testrig.Configs(bulkYAML))
	ctx := context.Background()
	var watches []*runtime.ChangeWatch
	for range 100 {
		fw, err := w.Engine.WatchChanges(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		watches = append(watches, fw)
	}
	start, before := time.Now(), w.Engine.FeedQueries()
	paused, _ := w.Waiting(t, "refund")
	for i, fw := range watches {
		var kinds []runtime.ChangeKind
		for len(kinds) < 2 {
			for _, l := range nextChanges(t, fw) {
				if l.Change.RunID == paused.RunID {
					kinds = append(kinds, l.Change.Change)
				}
			}
		}
		if kinds[0] != runtime.ChangeStarted || kinds[1] != runtime.ChangeWaiting {
			t.Fatalf("client %d got %v, want started then waiting", i, kinds)
		}
	}
	polls := w.Engine.FeedQueries() - before
	if most := int64(time.Since(start)/runtime.FollowInterval) + 2; polls > most {
		t.Errorf("%d statements in %s for 100 clients, want at most %d: one poll per interval", polls, time.Since(start), most)
	}
	for _, fw := range watches {
		fw.Close()
	}
	if w.Engine.FeedClients() != 0 {
		t.Fatalf("%d clients after every one closed", w.Engine.FeedClients())
	}
	// The poller notices at its next poll and stops: over four intervals
	// it sends one more statement at most.
	after := w.Engine.FeedQueries()
	time.Sleep(4 * runtime.FollowInterval) // nothing to wait for: that nothing happens is the point
	if n := w.Engine.FeedQueries() - after; n > 1 {
		t.Errorf("%d statements with no client, want none after the poll that found none", n)
	}
}

// A feed client holds no shutdown up: once the process drains, Next says
// so, for the client to attach again elsewhere from its cursor.
func TestChangeFeedEndsWhenTheProcessDrains(t *testing.T) {
	w := testrig.New(t, testrig.Configs(bulkYAML))
	fw, err := w.Engine.WatchChanges(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	w.Engine.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := fw.Next(ctx); !errors.Is(err, runtime.ErrFeedDraining) {
		t.Fatalf("Next after Drain = %v, want ErrFeedDraining", err)
	}
}
