package store_test

import (
	"context"
	"slices"
	"testing"

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
