package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// work runs a worker engine until the test ends.
func work(t *testing.T, eng *runtime.Engine, loops int) {
	t.Helper()
	testrig.Work(t, eng, loops, 20*time.Millisecond)
}

func TestDurableDecisionIsFinishedByAWorker(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, order := f.Waiting(t, "refund")
	c, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver, Path: runtime.PathDurable})
	if err != nil || c != nil {
		t.Fatalf("durable decide = %v, %v; want no continuation and no error", c, err)
	}
	if r := f.Run(t, paused.RunID); r.Status != runtime.StatusDecided || r.ClaimedBy != "" {
		t.Fatalf("run is %s held by %q, want decided and unheld", r.Status, r.ClaimedBy)
	}
	work(t, f.engine(0), 1)
	f.WaitStatus(t, paused.RunID, runtime.StatusCompleted, 10*time.Second)
	if n := f.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
}

func TestQueuedRunIsStartedByAWorker(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	order := f.Order(t)
	id, err := f.Engine.Enqueue(context.Background(), runtime.StartRequest{Configuration: "refund", Prompt: "Refund " + order, Owner: f.owner})
	if err != nil {
		t.Fatal(err)
	}
	work(t, f.engine(0), 1)
	f.WaitStatus(t, id, runtime.StatusWaitingForApproval, 10*time.Second)
}

// A request claimed the run and died before its first step: the decision
// is recorded, so a worker applies it and finishes the run, once.
func TestExpiredLeaseIsRecoveredFromTheRecordedDecision(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, order := f.Waiting(t, "refund")
	if _, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver}); err != nil {
		t.Fatal(err)
	}
	// The continuation is never run: its process died. Its lease runs out.
	if _, err := f.DB.Exec(`UPDATE runs SET lease_expires_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, paused.RunID); err != nil {
		t.Fatal(err)
	}
	work(t, f.engine(0), 1)
	f.WaitStatus(t, paused.RunID, runtime.StatusCompleted, 10*time.Second)
	if n := f.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
	approvals := 0
	for _, e := range f.Events(t, paused.RunID) {
		if e.Kind == runtime.KindApproval {
			approvals++
		}
	}
	if approvals != 1 {
		t.Errorf("%d approval events, want the decision applied once", approvals)
	}
}

// The holder died while a non-idempotent write was in flight: the write may
// or may not have happened, so the run is offered to a person again, with a
// note and a new digest, and the write is not repeated on its own.
func TestInterruptedWriteIsOfferedAgainNotRepeated(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, order := f.Waiting(t, "refund")
	ctx := context.Background()
	if _, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver}); err != nil {
		t.Fatal(err)
	}
	callID := paused.Pending.Calls[0].ID
	if _, err := f.DB.Exec(`UPDATE runs SET pending_effect = ?, lease_expires_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`,
		callID, paused.RunID); err != nil {
		t.Fatal(err)
	}
	work(t, f.engine(0), 1)
	r := f.WaitStatus(t, paused.RunID, runtime.StatusWaitingForApproval, 10*time.Second)
	if r.TurnDigest == paused.Digest || r.TurnDigest == "" {
		t.Errorf("digest after the interruption = %q, want a new one", r.TurnDigest)
	}
	if n := f.Refunds(t, order); n != 0 {
		t.Errorf("refunds = %d: the interrupted write was repeated", n)
	}
	evs := f.Events(t, paused.RunID)
	if last := evs[len(evs)-1]; last.Kind != runtime.KindSuspend || !strings.Contains(string(last.Payload), "interrupted") {
		t.Errorf("last event %s %s, want a suspension with the interrupted note", last.Kind, last.Payload)
	}
	out := f.Decide(t, runtime.DecideRequest{RunID: paused.RunID, Digest: r.TurnDigest, Actor: f.approver})
	if out.Status != runtime.StatusCompleted {
		t.Errorf("after a new approval: %+v", out)
	}
	if n := f.Refunds(t, order); n != 1 {
		t.Errorf("refunds after the new approval = %d, want 1", n)
	}
}

// A draining server hands its continuations back at the next step
// boundary; a worker of another process finishes them.
func TestDrainHandsTheRunBackToAWorker(t *testing.T) {
	f := newFixture(t, 0, slowYAML)
	paused, order := f.Waiting(t, "slow")
	server := f.engine(0)
	c, err := server.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	out := c.Run(context.Background(), runtime.ObserverFunc(func(runtime.Step) { once.Do(server.Drain) }))
	if out.Status != runtime.StatusDecided || out.Err != nil {
		t.Fatalf("outcome = %+v, want the run handed back as decided", out)
	}
	if r := f.Run(t, paused.RunID); r.Status != runtime.StatusDecided || r.ClaimedBy != "" {
		t.Fatalf("run is %s held by %q after the hand-back", r.Status, r.ClaimedBy)
	}
	work(t, f.engine(0), 1)
	f.WaitStatus(t, paused.RunID, runtime.StatusCompleted, 10*time.Second)
	if n := f.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
	evs := f.Events(t, paused.RunID)
	for i, e := range evs {
		if e.Seq != i+1 {
			t.Fatalf("event %d has seq %d: a gap or a duplicate across the hand-back", i, e.Seq)
		}
	}
}

// Two worker processes and 200 decided runs: each run executed once.
func TestTwoWorkersExecuteEachRunOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("200 runs")
	}
	f := newFixture(t, 0, refundYAML)
	const runs = 200
	ids := make([]int64, runs)
	orders := make([]string, runs)
	for i := range runs {
		paused, order := f.Waiting(t, "refund")
		if _, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
			Decision: runtime.DecisionApprove, Actor: f.approver, Path: runtime.PathDurable}); err != nil {
			t.Fatal(err)
		}
		ids[i], orders[i] = paused.RunID, order
	}
	work(t, f.engine(0), 2)
	work(t, f.engine(0), 2)
	for _, id := range ids {
		f.WaitStatus(t, id, runtime.StatusCompleted, 60*time.Second)
	}
	for _, o := range orders {
		if n := f.Refunds(t, o); n != 1 {
			t.Errorf("order %s refunded %d times, want 1", o, n)
		}
	}
	var approvals int
	if err := f.DB.Get(&approvals, `SELECT COUNT(*) FROM run_events WHERE kind = 'approval'`); err != nil {
		t.Fatal(err)
	}
	if approvals != runs {
		t.Errorf("%d approval events for %d runs: some decision was applied twice", approvals, runs)
	}
}
