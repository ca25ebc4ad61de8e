package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// ownedRuns are the owner's runs in every unsettled state a deletion
// meets (a running one is runtime's test), the orders they would refund,
// and a token of the owner's.
type ownedRuns struct {
	waiting, decided waitingRun
	queued           int64
	queuedOrder      string
	token            string
}

// ownRuns gives the rig's owner a waiting run, a decided run (approved on
// the durable path, no worker yet) and a queued run, and a token.
func ownRuns(t *testing.T, r *rig) ownedRuns {
	t.Helper()
	ctx := context.Background()
	o := ownedRuns{waiting: r.waiting(t, "paced"), decided: r.waiting(t, "paced")}
	if _, err := r.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.decided.id, Digest: o.decided.digest,
		Decision: runtime.DecisionApprove, Actor: r.operator, Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	o.queuedOrder = r.Order(t)
	id, err := r.Engine.Enqueue(ctx, runtime.StartRequest{Configuration: "paced", Prompt: "Refund " + o.queuedOrder, Owner: r.owner})
	if err != nil {
		t.Fatal(err)
	}
	o.queued = id
	if o.token, _, err = r.Store.CreateToken(ctx, r.owner.ID, []string{runtime.ScopeRunDecide}, time.Hour); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestUserDeleteCancelsTheirRuns: deleting a user cancels every run of
// theirs that has not settled (waiting, decided, queued) as owner_deleted
// and deletes their tokens; their waiting run can no longer be decided,
// no worker finds the decided or the queued one, no refund is made, and
// someone else's run is left alone.
func TestUserDeleteCancelsTheirRuns(t *testing.T) {
	r := newRig(t, pacedYAML("paced", 0, 0, 0))
	ctx := context.Background()
	o := ownRuns(t, r)
	theirs, _ := r.Start(t, testrig.Launch{Configuration: "paced", Owner: "operator"})

	stdout, stderr, err := turnstile(t, r.DSN, "user", "delete", "--name", "owner")
	if err != nil {
		t.Fatalf("user delete: %v\n%s", err, stderr)
	}
	if want := "user owner deleted: 1 API token deleted, 3 runs cancelled"; !strings.Contains(stdout, want) {
		t.Errorf("user delete said %q, want %q", stdout, want)
	}
	if _, err := r.Store.User(ctx, r.owner.ID); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("the user after user delete: %v, want not found", err)
	}
	for _, id := range []int64{o.waiting.id, o.decided.id, o.queued} {
		run := r.Run(t, id)
		if run.Status != runtime.StatusCancelled || run.TerminationReason != runtime.ReasonOwnerDeleted {
			t.Errorf("run %d is %s (%q), want cancelled (%s)", id, run.Status, run.TerminationReason, runtime.ReasonOwnerDeleted)
		}
		evs := r.Gapless(t, id)
		var kinds []runtime.EventKind
		for _, e := range evs {
			kinds = append(kinds, e.Kind)
		}
		if n := len(kinds); n < 3 || kinds[n-3] != runtime.KindCancel || kinds[n-2] != runtime.KindTurnEnded || kinds[n-1] != runtime.KindSettle {
			t.Errorf("run %d's events are %v, want them to end cancel, turn_ended, settle", id, kinds)
		}
	}
	if ds := r.Decisions(t, o.decided.id); len(ds) != 1 || ds[0].Outcome != "cancelled" || ds[0].Executed {
		t.Errorf("the decided run's decisions = %+v, want one, cancelled, never executed", ds)
	}
	if n := r.Count(t, `SELECT COUNT(*) FROM api_tokens WHERE user_id = ?`, r.owner.ID); n != 0 {
		t.Errorf("%d tokens of the deleted user remain", n)
	}
	if _, _, err := r.Store.Authenticate(ctx, o.token); !errors.Is(err, runtime.ErrTokenInvalid) {
		t.Errorf("the deleted user's token authenticates: %v", err)
	}

	before := r.State(t, o.waiting.id)
	_, err = r.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.waiting.id, Digest: o.waiting.digest,
		Decision: runtime.DecisionApprove, Actor: r.operator})
	if runtime.CodeOf(err) != runtime.CodeNotWaiting {
		t.Errorf("approving the deleted user's waiting run: %v, want not_waiting", err)
	}
	r.Unchanged(t, o.waiting.id, before)
	for name, claim := range map[string]func(context.Context, string, time.Duration) (*runtime.Run, error){
		"decided": r.Store.ClaimDecided, "queued": r.Store.ClaimQueued,
	} {
		if run, err := claim(ctx, "worker", time.Minute); !errors.Is(err, runtime.ErrNotFound) {
			t.Errorf("a worker's claim of a %s run found %+v, %v; want none", name, run != nil, err)
		}
	}
	for _, order := range []string{o.waiting.order, o.decided.order, o.queuedOrder} {
		if n := r.Refunds(t, order); n != 0 {
			t.Errorf("order %s refunded %d times", order, n)
		}
	}
	if run := r.Run(t, theirs.RunID); run.Status != runtime.StatusWaitingForApproval {
		t.Errorf("the operator's own run is %s, want it still waiting", run.Status)
	}
	if _, _, err := turnstile(t, r.DSN, "user", "delete", "--name", "owner"); err == nil || !strings.Contains(err.Error(), `no user "owner"`) {
		t.Errorf("deleting the user again: %v, want no user", err)
	}
}

// TestUserDeleteThatFailsWritesNothing: a deletion refused at its last
// statement (a trigger stands in for a database that fails midway) leaves
// the user, their token and every run as they were; so does deleting a
// user who does not exist.
func TestUserDeleteThatFailsWritesNothing(t *testing.T) {
	r := newRig(t, pacedYAML("paced", 0, 0, 0))
	ctx := context.Background()
	o := ownRuns(t, r)
	states := map[int64]testrig.State{}
	for _, id := range []int64{o.waiting.id, o.decided.id, o.queued} {
		states[id] = r.State(t, id)
	}
	tokens := r.Count(t, `SELECT COUNT(*) FROM api_tokens`)
	users := r.Count(t, `SELECT COUNT(*) FROM users`)
	unchanged := func(what string) {
		t.Helper()
		for id, before := range states {
			r.Unchanged(t, id, before)
		}
		if n := r.Count(t, `SELECT COUNT(*) FROM api_tokens`); n != tokens {
			t.Errorf("after %s: %d tokens, want %d", what, n, tokens)
		}
		if n := r.Count(t, `SELECT COUNT(*) FROM users`); n != users {
			t.Errorf("after %s: %d users, want %d", what, n, users)
		}
		if n := r.Count(t, `SELECT COUNT(*) FROM webhook_deliveries`); n != 0 {
			t.Errorf("after %s: %d notifications written", what, n)
		}
	}

	if _, _, err := turnstile(t, r.DSN, "user", "delete", "--name", "nobody"); err == nil || !strings.Contains(err.Error(), `no user "nobody"`) {
		t.Errorf("deleting no user: %v, want no user \"nobody\"", err)
	}
	unchanged("deleting no user")

	if _, err := r.DB.Exec(`CREATE TRIGGER users_undeletable BEFORE DELETE ON users FOR EACH ROW
		SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := turnstile(t, r.DSN, "user", "delete", "--name", "owner"); err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Errorf("a deletion the database refuses: %v, want its error", err)
	}
	unchanged("a deletion that failed at its last statement")
	if _, _, err := r.Store.Authenticate(ctx, o.token); err != nil {
		t.Errorf("the token after a failed deletion: %v", err)
	}
}
