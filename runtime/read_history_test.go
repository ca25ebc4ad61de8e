package runtime_test

import (
	"context"
	"slices"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestPendingPagesReachEveryRun: read a page at a time from its cursor,
// the waiting runs come oldest first, each once, however many there are,
// with the same total on every page; filters by tool and configuration
// narrow both the pages and the total; a plain user sees only their own.
func TestPendingPagesReachEveryRun(t *testing.T) {
	f := newFixture(t, 0, refundYAML, inputYAML)
	ctx := context.Background()
	var want []int64
	for i := range 7 {
		cfg := "refund"
		if i%3 == 2 {
			cfg = "input"
		}
		o, _ := f.Waiting(t, cfg)
		want = append(want, o.RunID)
	}
	var got []int64
	q := runtime.WaitingQuery{Limit: 3}
	for pages := 0; ; pages++ {
		page, err := f.Engine.Pending(ctx, f.approver, q)
		if err != nil {
			t.Fatal(err)
		}
		if page.Total != len(want) {
			t.Errorf("page %d: total %d, want %d", pages, page.Total, len(want))
		}
		for _, p := range page.Runs {
			got = append(got, p.Run.ID)
		}
		if page.Next == nil {
			break
		}
		if pages > 5 {
			t.Fatal("the pages do not end")
		}
		// The cursor survives its trip through a URL.
		if q.After, err = runtime.ParseWaitingCursor(page.Next.String()); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("runs read page by page = %v, want every waiting run oldest first %v", got, want)
	}

	page, err := f.Engine.Pending(ctx, f.approver, runtime.WaitingQuery{Limit: 50, Tool: "ask_operator"})
	if err != nil || page.Total != 2 || len(page.Runs) != 2 || page.Runs[0].Turn.Kind != runtime.TurnInput {
		t.Errorf("tool filter: %d runs of %d (%v), want the 2 input runs", len(page.Runs), page.Total, err)
	}
	cfg, err := f.Store.ConfigurationByIdentifier(ctx, "refund")
	if err != nil {
		t.Fatal(err)
	}
	if page, err := f.Engine.Pending(ctx, f.approver, runtime.WaitingQuery{Limit: 50, ConfigurationID: cfg.ID}); err != nil || page.Total != 5 {
		t.Errorf("configuration filter: total %d (%v), want 5", page.Total, err)
	}
	if page, err := f.Engine.Pending(ctx, f.other, runtime.WaitingQuery{Limit: 50}); err != nil || page.Total != 0 || len(page.Runs) != 0 {
		t.Errorf("a plain user who owns nothing sees %d of %d (%v), want none", len(page.Runs), page.Total, err)
	}
	if _, err := runtime.ParseWaitingCursor("not-a-cursor"); runtime.CodeOf(err) != runtime.CodeInvalidRequest {
		t.Errorf("a made-up cursor: %v, want invalid_request", err)
	}
	if _, err := f.Engine.Pending(ctx, f.approver, runtime.WaitingQuery{Limit: runtime.MaxPage + 1}); runtime.CodeOf(err) != runtime.CodeInvalidRequest {
		t.Errorf("a limit over the maximum: %v, want invalid_request", err)
	}
}

// TestHistoryShowsWhatEachMaySee: the owner pages through their runs
// newest first; a decider sees only the runs they decided, with nothing of
// their content, and their decision; admins see every run and may filter
// by owner; a stranger sees none.
func TestHistoryShowsWhatEachMaySee(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	ctx := context.Background()
	var ids []int64
	for range 5 {
		o, _ := f.Waiting(t, "refund")
		ids = append(ids, o.RunID)
	}
	decided := map[int64]runtime.Outcome{}
	for _, id := range ids[:2] {
		o := f.Decide(t, runtime.DecideRequest{RunID: id, Digest: f.Run(t, id).TurnDigest, Decision: runtime.DecisionDeny, Actor: f.approver})
		decided[id] = o
	}

	var got []int64
	q := runtime.RunQuery{Limit: 2}
	for {
		page, err := f.Engine.History(ctx, f.owner, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Runs {
			got = append(got, l.Run.ID)
			if !l.MayRead || l.Run.Prompt == "" {
				t.Errorf("the owner's run %d: may read %v, prompt %q; want it whole", l.Run.ID, l.MayRead, l.Run.Prompt)
			}
		}
		if page.Next == 0 {
			break
		}
		q.Before = page.Next
	}
	newestFirst := slices.Clone(ids)
	slices.Reverse(newestFirst)
	if !slices.Equal(got, newestFirst) {
		t.Errorf("the owner's history = %v, want %v", got, newestFirst)
	}

	page, err := f.Engine.History(ctx, f.approver, runtime.RunQuery{Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 2 {
		t.Fatalf("the decider's history has %d runs, want the 2 they decided", len(page.Runs))
	}
	for _, l := range page.Runs {
		if _, ok := decided[l.Run.ID]; !ok || l.MayRead || l.Run.Prompt != "" || l.Run.OwnerID != 0 ||
			l.Decision == nil || l.Decision.Kind != runtime.DecisionDeny || l.Run.Status != runtime.StatusCompleted {
			t.Errorf("the decider sees %+v (run %+v), want only id, status, times and their denial", l, l.Run)
		}
	}
	if page, err := f.Engine.History(ctx, f.owner, runtime.RunQuery{Limit: 50, DecidedByMe: true}); err != nil || len(page.Runs) != 0 {
		t.Errorf("the owner's runs decided by the owner: %d (%v), want none", len(page.Runs), err)
	}
	if page, err := f.Engine.History(ctx, f.other, runtime.RunQuery{Limit: 50}); err != nil || len(page.Runs) != 0 {
		t.Errorf("a stranger's history: %d runs (%v), want none", len(page.Runs), err)
	}
	page, err = f.Engine.History(ctx, f.admin, runtime.RunQuery{Limit: 50, OwnerID: f.owner.ID, Status: runtime.StatusWaitingForApproval})
	if err != nil || len(page.Runs) != 3 || !page.Runs[0].MayRead {
		t.Errorf("admin, the owner's waiting runs: %d (%v), want 3, readable", len(page.Runs), err)
	}
	if page, err := f.Engine.History(ctx, f.other, runtime.RunQuery{Limit: 50, OwnerID: f.owner.ID}); err != nil || len(page.Runs) != 0 {
		t.Errorf("a stranger filtering by owner: %d runs (%v), want none", len(page.Runs), err)
	}
}
