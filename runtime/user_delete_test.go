package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// kinds lists the kinds of a run's events, for a failure message.
func kinds(evs []runtime.Event) []runtime.EventKind {
	out := make([]runtime.EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

// wantOwnerDeleted fails the test unless the run settled once, as
// cancelled because its owner was deleted, with its last events a cancel,
// the turn's end and the settle.
func wantOwnerDeleted(t *testing.T, w *testrig.World, id int64) {
	t.Helper()
	if r := w.Run(t, id); r.Status != runtime.StatusCancelled || r.TerminationReason != runtime.ReasonOwnerDeleted {
		t.Errorf("run %d is %s (%q), want cancelled (%s)", id, r.Status, r.TerminationReason, runtime.ReasonOwnerDeleted)
	}
	evs := w.Gapless(t, id)
	k := kinds(evs)
	if n := len(k); n < 3 || k[n-3] != runtime.KindCancel || k[n-2] != runtime.KindTurnEnded || k[n-1] != runtime.KindSettle || testrig.CountKind(evs, runtime.KindSettle) != 1 {
		t.Errorf("run %d's events are %v, want one settle, after a cancel, at the end", id, k)
	}
}

// TestDeletingAUserNotifiesAsACancelDoes: the runs a deletion cancels
// write their run.settled in the deletion's commit, with the reason.
func TestDeletingAUserNotifiesAsACancelDoes(t *testing.T) {
	w := notifyWorld(t, notifyYAML("told", runtime.PrivacyMetadata, ""))
	paused, _ := w.Waiting(t, "told")
	got, err := w.Engine.DeleteUser(context.Background(), w.Users["owner"].ID)
	if err != nil || got != (runtime.DeletedUser{Cancelled: 1}) {
		t.Fatalf("DeleteUser = %+v, %v; want one run cancelled", got, err)
	}
	wantOwnerDeleted(t, w, paused.RunID)
	rows := w.Outbox(t, paused.RunID)
	if len(rows) != 3 || rows[2].Event != runtime.EventRunSettled {
		t.Fatalf("outbox = %+v, want the pause's two notifications and a run.settled", rows)
	}
	if b := decodeBody(t, rows[2].Body); b.Data["status"] != string(runtime.StatusCancelled) ||
		b.Data["termination_reason"] != runtime.ReasonOwnerDeleted {
		t.Errorf("run.settled data = %v, want cancelled, %s", b.Data, runtime.ReasonOwnerDeleted)
	}
}

// TestDeletingAUserStopsTheirRunningRun: a run whose continuation holds
// it when its owner is deleted stops before its next write — the approved
// refund never runs — and settles once, as owner_deleted, notifying.
func TestDeletingAUserStopsTheirRunningRun(t *testing.T) {
	w := notifyWorld(t, slowYAML)
	ctx := context.Background()
	paused, order := w.Waiting(t, "slow")
	c, err := w.Engine.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: w.Actor("approver")})
	if err != nil {
		t.Fatal(err)
	}
	var deleted runtime.DeletedUser
	out := c.Run(ctx, runtime.ObserverFunc(func(s runtime.Step) {
		if s.Kind != runtime.KindApproval {
			return
		}
		// The approval is recorded; the refund is next.
		if deleted, err = w.Engine.DeleteUser(ctx, w.Users["owner"].ID); err != nil {
			t.Errorf("DeleteUser: %v", err)
		}
	}))
	if deleted != (runtime.DeletedUser{Stopping: 1}) {
		t.Errorf("DeleteUser = %+v, want one running run stopping", deleted)
	}
	if out.Status != runtime.StatusCancelled || out.Reason != runtime.ReasonOwnerDeleted || out.Err != nil {
		t.Errorf("the continuation ended %+v, want cancelled, %s", out, runtime.ReasonOwnerDeleted)
	}
	wantOwnerDeleted(t, w, paused.RunID)
	if n := w.Refunds(t, order); n != 0 {
		t.Errorf("order %s refunded %d times after its owner was deleted", order, n)
	}
	if r := w.Run(t, paused.RunID); r.PendingEffect != "" || r.ClaimedBy != "" {
		t.Errorf("the settled run keeps pending effect %q, holder %q", r.PendingEffect, r.ClaimedBy)
	}
	rows := w.Outbox(t, paused.RunID)
	if last := rows[len(rows)-1]; last.Event != runtime.EventRunSettled ||
		decodeBody(t, last.Body).Data["termination_reason"] != runtime.ReasonOwnerDeleted {
		t.Errorf("last notification = %s %s, want run.settled with %s", last.Event, last.Body, runtime.ReasonOwnerDeleted)
	}
}

// TestRunsOfAGoneOwnerAreNeitherDecidedNorContinued: runs whose owner
// no longer exists without their deletion having cancelled them (as for a
// run created at the moment of the deletion) are refused as not_waiting
// by the pipeline, single and bulk, and a worker cancels the decided and
// the queued one before any step: no refund, no model round.
func TestRunsOfAGoneOwnerAreNeitherDecidedNorContinued(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	ctx := context.Background()
	waiting, waitingOrder := f.Waiting(t, "refund")
	decided, decidedOrder := f.Waiting(t, "refund")
	if _, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: decided.RunID, Digest: decided.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver, Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	queued, err := f.Engine.Enqueue(ctx, runtime.StartRequest{Configuration: "refund", Prompt: "Refund " + f.Order(t), Owner: f.owner})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.DB.Exec(`DELETE FROM users WHERE id = ?`, f.owner.ID); err != nil {
		t.Fatal(err)
	}

	before := f.State(t, waiting.RunID)
	if _, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: waiting.RunID, Digest: waiting.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver}); runtime.CodeOf(err) != runtime.CodeNotWaiting {
		t.Errorf("approving a run whose owner is gone: %v, want not_waiting", err)
	}
	res := f.Engine.DecideMany(ctx, []runtime.DecideRequest{{RunID: waiting.RunID, Digest: waiting.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver, Path: runtime.PathDurable}}, nil)
	if len(res) != 1 || runtime.CodeOf(res[0].Err) != runtime.CodeNotWaiting {
		t.Errorf("a bulk approval of it = %+v; want not_waiting", res)
	}
	f.Unchanged(t, waiting.RunID, before)

	work(t, f.engine(0), 1)
	for _, id := range []int64{decided.RunID, queued} {
		f.WaitStatus(t, id, runtime.StatusCancelled, 10*time.Second)
		wantOwnerDeleted(t, f.World, id)
	}
	if evs := f.Events(t, queued); len(evs) != 4 {
		t.Errorf("the queued run's events are %v, want only its turn's start, the cancel, the turn's end and the settle", kinds(evs))
	}
	for _, order := range []string{waitingOrder, decidedOrder} {
		if n := f.Refunds(t, order); n != 0 {
			t.Errorf("order %s refunded %d times for a user who does not exist", order, n)
		}
	}
	if ds := f.Decisions(t, decided.RunID); len(ds) != 1 || ds[0].Executed || ds[0].Outcome != "cancelled" {
		t.Errorf("the decided run's decision = %+v, want never executed, cancelled", ds)
	}
}

// TestADecisionClaimedBeforeTheDeletionDoesNotAct: a decision that won
// its claim just before its run's owner was deleted is never carried
// out: on the request path its continuation finds the owner gone and
// cancels the run before applying it; on the durable path the deletion
// cancels the decided run and no worker ever claims it.
func TestADecisionClaimedBeforeTheDeletionDoesNotAct(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	ctx := context.Background()
	inRequest, requestOrder := f.Waiting(t, "refund")
	c, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: inRequest.RunID, Digest: inRequest.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver})
	if err != nil {
		t.Fatal(err)
	}
	durable, durableOrder := f.Waiting(t, "refund")
	if _, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: durable.RunID, Digest: durable.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver, Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}

	got, err := f.Engine.DeleteUser(ctx, f.owner.ID)
	if err != nil || got != (runtime.DeletedUser{Cancelled: 1, Stopping: 1}) {
		t.Fatalf("DeleteUser = %+v, %v; want the decided run cancelled and the claimed one stopping", got, err)
	}
	if run, err := f.Store.ClaimDecided(ctx, "worker", time.Minute); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("a worker claimed a decided run (%v, %v) whose owner was deleted", run != nil, err)
	}
	out := c.Run(ctx, nil)
	if out.Status != runtime.StatusCancelled || out.Reason != runtime.ReasonOwnerDeleted {
		t.Errorf("the claimed run's continuation ended %+v, want cancelled, %s", out, runtime.ReasonOwnerDeleted)
	}
	for _, id := range []int64{inRequest.RunID, durable.RunID} {
		wantOwnerDeleted(t, f.World, id)
		if n := testrig.CountKind(f.Events(t, id), runtime.KindApproval); n != 0 {
			t.Errorf("run %d recorded %d approvals after its owner was deleted", id, n)
		}
	}
	for _, order := range []string{requestOrder, durableOrder} {
		if n := f.Refunds(t, order); n != 0 {
			t.Errorf("order %s refunded %d times", order, n)
		}
	}
}

// TestADecisionRacingTheDeletion: a decision and the deletion of the
// run's owner, at once, many times: exactly one of them wins — the
// decision is refused (not_waiting) or its run settles — and every run
// settles once, cancelled as owner_deleted unless it completed first.
func TestADecisionRacingTheDeletion(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	ctx := context.Background()
	const rounds = 8
	for i := range rounds {
		u := &runtime.User{Name: fmt.Sprintf("racer-%d", i), Role: runtime.RoleUser}
		if err := f.Store.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		f.Users[u.Name] = u
		paused, _ := f.Start(t, testrig.Launch{Configuration: "refund", Owner: u.Name})
		var wg sync.WaitGroup
		var decideErr, deleteErr error
		var out runtime.Outcome
		wg.Go(func() {
			var c *runtime.Continuation
			if c, decideErr = f.Engine.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
				Decision: runtime.DecisionApprove, Actor: f.approver}); decideErr == nil {
				out = c.Run(ctx, nil)
			}
		})
		wg.Go(func() { _, deleteErr = f.Engine.DeleteUser(ctx, u.ID) })
		wg.Wait()
		if deleteErr != nil {
			t.Fatalf("round %d: DeleteUser: %v", i, deleteErr)
		}
		if decideErr != nil && runtime.CodeOf(decideErr) != runtime.CodeNotWaiting {
			t.Errorf("round %d: the decision: %v, want it to win or be not_waiting", i, decideErr)
		}
		if decideErr == nil && out.Err != nil {
			t.Errorf("round %d: the continuation stopped: %v", i, out.Err)
		}
		r := f.Run(t, paused.RunID)
		evs := f.Gapless(t, paused.RunID)
		if testrig.CountKind(evs, runtime.KindSettle) != 1 || evs[len(evs)-1].Kind != runtime.KindSettle {
			t.Errorf("round %d: events %v, want one settle, last", i, kinds(evs))
		}
		switch {
		case r.Status == runtime.StatusCompleted && decideErr == nil:
		case r.Status == runtime.StatusCancelled && r.TerminationReason == runtime.ReasonOwnerDeleted:
		default:
			t.Errorf("round %d: run %d is %s (%q) after decision error %v", i, r.ID, r.Status, r.TerminationReason, decideErr)
		}
	}
}
