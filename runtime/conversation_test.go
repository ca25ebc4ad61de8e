package runtime_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// followUp sends a message into a settled run as actor and runs its turn
// in the test until it pauses or settles.
func (f *fixture) followUp(t testing.TB, id int64, actor runtime.Actor, content string) runtime.Outcome {
	t.Helper()
	c, err := f.Engine.SendMessage(context.Background(), runtime.MessageRequest{RunID: id, Content: content, Actor: actor})
	if err != nil {
		t.Fatalf("follow-up to run %d: %v", id, err)
	}
	out := c.Run(context.Background(), nil)
	if out.Err != nil {
		t.Fatalf("turn of run %d: %v", id, out.Err)
	}
	return out
}

// turnsOf are the turns of a run's events, in seq order, and whether each
// turn's events are bracketed by turn_started and turn_ended.
func turnsOf(t *testing.T, evs []runtime.Event) map[int][]runtime.EventKind {
	t.Helper()
	out := map[int][]runtime.EventKind{}
	last := 0
	for _, e := range evs {
		if e.Turn < last {
			t.Errorf("event %d of turn %d follows one of turn %d", e.Seq, e.Turn, last)
		}
		last = e.Turn
		out[e.Turn] = append(out[e.Turn], e.Kind)
	}
	return out
}

// A follow-up starts turn 2 with the whole transcript: it pauses for the
// refund of the order it names, is approved, and settles; its events and
// messages carry turn 2, and the first turn's are untouched.
func TestFollowUpIsTheNextTurn(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	first, order := f.Waiting(t, "refund")
	if out := f.Approve(t, first); out.Status != runtime.StatusCompleted {
		t.Fatalf("turn 1 = %s", out.Status)
	}
	other := f.Order(t)
	paused := f.followUp(t, first.RunID, f.owner, "now refund "+other+" too")
	if paused.Status != runtime.StatusWaitingForApproval {
		t.Fatalf("turn 2 = %+v, want it waiting for the refund", paused)
	}
	if paused.Pending.Calls[0].ID == "" || string(paused.Pending.Calls[0].Arguments) == "" {
		t.Fatalf("pending = %+v", paused.Pending)
	}
	if r := f.Run(t, first.RunID); r.ConversationTurn != 2 || r.Answer != "" || r.TerminationReason != "" {
		t.Errorf("run = turn %d, answer %q, reason %q; want turn 2 and no answer yet", r.ConversationTurn, r.Answer, r.TerminationReason)
	}
	if out := f.Approve(t, paused); out.Status != runtime.StatusCompleted {
		t.Fatalf("turn 2 after approval = %s", out.Status)
	}
	if f.Refunds(t, order) != 1 || f.Refunds(t, other) != 1 {
		t.Errorf("refunds: %s %d, %s %d; want one each", order, f.Refunds(t, order), other, f.Refunds(t, other))
	}
	turns := turnsOf(t, f.Gapless(t, first.RunID))
	for n := 1; n <= 2; n++ {
		k := turns[n]
		if len(k) < 3 || k[0] != runtime.KindTurnStarted || k[len(k)-2] != runtime.KindTurnEnded || k[len(k)-1] != runtime.KindSettle {
			t.Errorf("turn %d's events = %v, want turn_started … turn_ended, settle", n, k)
		}
	}
	if n := f.Count(t, `SELECT COUNT(*) FROM run_messages WHERE run_id = ? AND turn = 2 AND body LIKE ?`, first.RunID, "%"+other+"%"); n == 0 {
		t.Error("no message of turn 2 names the follow-up's order")
	}
	if n := f.Count(t, `SELECT COUNT(*) FROM decisions WHERE run_id = ?`, first.RunID); n != 2 {
		t.Errorf("%d decisions, want one per turn", n)
	}
}

// What a follow-up is refused, with nothing written: a run that runs or
// waits (run_busy), a stranger and a missing run alike (not_found), an
// empty message (invalid_request). Admins may send one to anyone's run.
func TestFollowUpRefusals(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, _ := f.Waiting(t, "refund")
	ctx := context.Background()
	send := func(id int64, actor runtime.Actor, content string) error {
		_, err := f.Engine.SendMessage(ctx, runtime.MessageRequest{RunID: id, Content: content, Actor: actor})
		return err
	}
	before := f.State(t, paused.RunID)
	if err := send(paused.RunID, f.owner, "and then?"); runtime.CodeOf(err) != runtime.CodeRunBusy {
		t.Errorf("follow-up to a waiting run: %v, want run_busy", err)
	}
	f.Unchanged(t, paused.RunID, before)
	f.Approve(t, paused)
	settled := f.State(t, paused.RunID)
	for name, tc := range map[string]struct {
		id      int64
		actor   runtime.Actor
		content string
		code    runtime.Code
	}{
		"a stranger":       {paused.RunID, f.other, "hello", runtime.CodeNotFound},
		"an approver":      {paused.RunID, f.approver, "hello", runtime.CodeNotFound},
		"a missing run":    {paused.RunID + 1000, f.owner, "hello", runtime.CodeNotFound},
		"an empty message": {paused.RunID, f.owner, "  \n ", runtime.CodeInvalidRequest},
		"invalid text":     {paused.RunID, f.owner, "\xff", runtime.CodeInvalidRequest},
	} {
		if err := send(tc.id, tc.actor, tc.content); runtime.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
	f.Unchanged(t, paused.RunID, settled)
	if out := f.followUp(t, paused.RunID, f.admin, "now refund "+f.Order(t)+" too"); !out.Status.Waiting() {
		t.Errorf("an admin's follow-up: %s, want it waiting", out.Status)
	}
}

// A storm of 50 follow-ups at once to one settled run starts exactly one
// turn; the others are told run_busy.
func TestFollowUpStormStartsOneTurn(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, _ := f.Waiting(t, "refund")
	f.Approve(t, paused)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		started []*runtime.Continuation
		busy    int
	)
	for range 50 {
		wg.Go(func() {
			c, err := f.Engine.SendMessage(context.Background(), runtime.MessageRequest{RunID: paused.RunID,
				Content: "now refund ORD-9 too", Actor: f.owner})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				started = append(started, c)
			case runtime.CodeOf(err) == runtime.CodeRunBusy:
				busy++
			default:
				t.Errorf("follow-up: %v", err)
			}
		})
	}
	wg.Wait()
	if len(started) != 1 || busy != 49 {
		t.Fatalf("%d turns started, %d run_busy; want 1 and 49", len(started), busy)
	}
	started[0].Run(context.Background(), nil)
	if r := f.Run(t, paused.RunID); r.ConversationTurn != 2 {
		t.Errorf("turn %d, want 2", r.ConversationTurn)
	}
	if n := f.Count(t, `SELECT COUNT(*) FROM run_events WHERE run_id = ? AND kind = 'turn_started'`, paused.RunID); n != 2 {
		t.Errorf("%d turn_started events, want 2", n)
	}
	if n := f.Count(t, `SELECT COUNT(*) FROM run_messages WHERE run_id = ? AND turn = 2 AND JSON_VALUE(body, '$.role') = 'user'`, paused.RunID); n != 1 {
		t.Errorf("%d user messages in turn 2, want 1", n)
	}
}

// The durable path: a queued follow-up is carried out by a worker; a turn
// whose holder died is recovered from its last step like any other.
func TestFollowUpDurableAndRecovered(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, _ := f.Waiting(t, "refund")
	f.Approve(t, paused)
	ctx := context.Background()
	if err := f.Engine.QueueMessage(ctx, runtime.MessageRequest{RunID: paused.RunID, Content: "now refund " + f.Order(t) + " too", Actor: f.owner}); err != nil {
		t.Fatal(err)
	}
	if r := f.Run(t, paused.RunID); r.Status != runtime.StatusQueued || r.ConversationTurn != 2 {
		t.Fatalf("queued follow-up: %s at turn %d", r.Status, r.ConversationTurn)
	}
	work(t, f.engine(0), 1)
	second := f.WaitStatus(t, paused.RunID, runtime.StatusWaitingForApproval, 10*time.Second)
	f.Decide(t, runtime.DecideRequest{RunID: second.ID, Digest: second.TurnDigest})

	// Turn 3 is started in a request whose process dies at once.
	c, err := f.Engine.SendMessage(ctx, runtime.MessageRequest{RunID: paused.RunID, Content: "and " + f.Order(t), Actor: f.owner})
	if err != nil || c == nil {
		t.Fatalf("turn 3: %v", err)
	}
	if _, err := f.DB.Exec(`UPDATE runs SET lease_expires_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, paused.RunID); err != nil {
		t.Fatal(err)
	}
	work(t, f.engine(0), 1)
	third := f.WaitStatus(t, paused.RunID, runtime.StatusWaitingForApproval, 10*time.Second)
	if third.ConversationTurn != 3 {
		t.Errorf("recovered turn = %d, want 3", third.ConversationTurn)
	}
	turns := turnsOf(t, f.Gapless(t, paused.RunID))
	if len(turns) != 3 || turns[3][0] != runtime.KindTurnStarted {
		t.Errorf("turns = %v, want three, the third started", turns)
	}
}

// The same calls asked in a later turn are a new question: its digest
// differs, so a stale form of turn 1 can never claim turn 2.
func TestFollowUpDigestIsItsTurns(t *testing.T) {
	f := newFixture(t, 0, fourEyesYAML)
	first, order := f.Start(t, testrig.Launch{Configuration: "four-eyes"})
	f.Approve(t, first)
	second := f.followUp(t, first.RunID, f.owner, "Refund "+order)
	if second.Digest == first.Digest || second.Digest == "" {
		t.Fatalf("turn 2's digest = %q, turn 1's %q; want a new one", second.Digest, first.Digest)
	}
	_, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: first.RunID, Digest: first.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver})
	if code := runtime.CodeOf(err); code != runtime.CodeStaleTurn && code != runtime.CodeNotWaiting {
		t.Errorf("turn 1's digest on turn 2: %v, want stale_turn", err)
	}
	// Four eyes hold in every turn: the owner may not approve turn 2.
	_, err = f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: first.RunID, Digest: second.Digest,
		Decision: runtime.DecisionApprove, Actor: f.owner})
	if runtime.CodeOf(err) != runtime.CodeFourEyes {
		t.Errorf("the owner approving turn 2: %v, want four_eyes", err)
	}
}
