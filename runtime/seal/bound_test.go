package seal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// copyColumn copies one sealed value with SQL from the row where (from)
// into the row where (to) of the same table and column, as someone with
// write access to the database and no key could.
func (w *world) copyColumn(t *testing.T, table, column, where string, from, to []any) {
	t.Helper()
	var v []byte
	if err := w.DB.Get(&v, fmt.Sprintf("SELECT `%s` FROM `%s` WHERE %s", column, table, where), from...); err != nil {
		t.Fatalf("read %s.%s: %v", table, column, err)
	}
	res, err := w.DB.Exec(fmt.Sprintf("UPDATE `%s` SET `%s` = ? WHERE %s", table, column, where), append([]any{v}, to...)...)
	if err != nil {
		t.Fatalf("copy %s.%s: %v", table, column, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("copy %s.%s changed %d rows, want 1", table, column, n)
	}
}

// unreadable reports whether content read through the engine is the
// stand-in for content that does not open, and carries none of markers.
func unreadable(s string, markers ...string) bool {
	for _, m := range markers {
		if strings.Contains(s, m) {
			return false
		}
	}
	return strings.Contains(s, "sealed") || strings.Contains(s, "unreadable")
}

// TestSealedContentCopiedToAnotherRowDoesNotOpen: with state keys set,
// content sealed for one place — a run's prompt, answer, state and
// transcript, an event's payload, a decision's reason and edited
// arguments — copied with SQL into another run's row (or another event of
// the same run) does not open there. Pages and the API show it as
// unreadable; a decision on a run whose state was moved is refused with
// unreadable_state and writes nothing; a run whose transcript or recorded
// decision was moved settles as failed, and no refund is made for it.
func TestSealedContentCopiedToAnotherRowDoesNotOpen(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.Configure(t, contentYAML...)
	eng := w.engine(t, entry("A", keyA))

	t.Run("prompt, answer and event payloads", func(t *testing.T) {
		x, _ := w.Start(t, testrig.Launch{Configuration: "full-refund", Prompt: "PROMPT-MARKER refund %s", Engine: eng})
		c, err := eng.Decide(ctx, runtime.DecideRequest{RunID: x.RunID, Digest: x.Digest, Decision: runtime.DecisionApprove,
			Reason: "REASON-MARKER", Actor: w.approver, Path: runtime.PathRequest})
		if err != nil {
			t.Fatal(err)
		}
		if out := c.Run(ctx, nil); out.Status != runtime.StatusCompleted {
			t.Fatalf("run %d: %s (%v), want completed", x.RunID, out.Status, out.Err)
		}
		y := w.waiting(t, eng)
		if out, err := w.approve(eng, y); err != nil || out.Status != runtime.StatusCompleted {
			t.Fatalf("run %d: %v, %v; want completed", y.RunID, out.Status, err)
		}
		for _, col := range []string{"prompt", "answer"} {
			w.copyColumn(t, "runs", col, "id = ?", []any{x.RunID}, []any{y.RunID})
		}
		yEvents := len(w.Events(t, y.RunID))
		xEvents := len(w.Events(t, x.RunID))
		for seq := 1; seq <= min(xEvents, yEvents); seq++ {
			w.copyColumn(t, "run_events", "payload", "run_id = ? AND seq = ?", []any{x.RunID, seq}, []any{y.RunID, seq})
		}
		// Within one run: the first event's payload over the second's.
		w.copyColumn(t, "run_events", "payload", "run_id = ? AND seq = ?", []any{x.RunID, 1}, []any{x.RunID, 2})

		run, _, err := eng.Visible(ctx, y.RunID, w.owner)
		if err != nil {
			t.Fatalf("read run %d: %v", y.RunID, err)
		}
		if !unreadable(run.Prompt, "MARKER") || !unreadable(run.Answer, "MARKER") {
			t.Errorf("run %d with the prompt and answer of run %d: prompt %q, answer %q; want both unreadable",
				y.RunID, x.RunID, run.Prompt, run.Answer)
		}
		evs, err := eng.Events(ctx, y.RunID, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Seq <= min(xEvents, yEvents) && !unreadable(string(e.Payload), "MARKER") {
				t.Errorf("run %d event %d with run %d's payload reads %s; want it unreadable", y.RunID, e.Seq, x.RunID, e.Payload)
			}
		}
		evs, err = eng.Events(ctx, x.RunID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) < 2 || !unreadable(string(evs[1].Payload)) || unreadable(string(evs[0].Payload)) {
			t.Errorf("run %d with event 1's payload over event 2's: %s / %s; want event 1 to read and event 2 unreadable",
				x.RunID, evs[0].Payload, evs[1].Payload)
		}
	})

	t.Run("state", func(t *testing.T) {
		p := w.waiting(t, eng)
		q := w.waiting(t, eng)
		w.copyColumn(t, "runs", "state", "id = ?", []any{p.RunID}, []any{q.RunID})
		before := w.State(t, q.RunID)
		_, err := w.approve(eng, q)
		if got := runtime.CodeOf(err); got != runtime.CodeUnreadableState {
			t.Fatalf("decide run %d holding run %d's state = %v, want unreadable_state", q.RunID, p.RunID, err)
		}
		w.Unchanged(t, q.RunID, before)
		if _, err := eng.PendingOne(ctx, q.RunID, w.approver); runtime.CodeOf(err) != runtime.CodeUnreadableState {
			t.Errorf("the page of run %d = %v, want unreadable_state", q.RunID, err)
		}
	})

	t.Run("transcript", func(t *testing.T) {
		r := w.waiting(t, eng)
		s, order := w.Start(t, testrig.Launch{Configuration: "refund", Engine: eng})
		w.copyColumn(t, "run_messages", "body", "run_id = ? AND idx = ?", []any{r.RunID, 0}, []any{s.RunID, 0})
		out, err := w.approve(eng, s)
		if err != nil {
			t.Fatalf("decide run %d: %v", s.RunID, err)
		}
		if out.Status != runtime.StatusFailed || out.Reason != runtime.ReasonUnreadable {
			t.Errorf("run %d holding run %d's first message: %s (%s), want failed with unreadable_state", s.RunID, r.RunID, out.Status, out.Reason)
		}
		if n := w.Refunds(t, order); n != 0 {
			t.Errorf("order %s of run %d was refunded %d times, want never", order, s.RunID, n)
		}
	})

	t.Run("decision", func(t *testing.T) {
		d1, order1 := w.Start(t, testrig.Launch{Configuration: "full-refund", Engine: eng})
		d2, order2 := w.Start(t, testrig.Launch{Configuration: "full-refund", Engine: eng})
		edit := fmt.Sprintf(`{"order_id":%q,"amount_cents":321,"reason":"EDIT-MARKER"}`, order1)
		if _, err := eng.Decide(ctx, runtime.DecideRequest{RunID: d1.RunID, Digest: d1.Digest, Decision: runtime.DecisionApprove,
			Reason: "REASON-MARKER", Actor: w.approver, Path: runtime.PathDurable,
			Arguments: map[string]json.RawMessage{d1.Pending.Calls[0].ID: json.RawMessage(edit)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Decide(ctx, runtime.DecideRequest{RunID: d2.RunID, Digest: d2.Digest, Decision: runtime.DecisionApprove,
			Reason: "plain approval", Actor: w.approver, Path: runtime.PathDurable}); err != nil {
			t.Fatal(err)
		}
		for _, col := range []string{"reason", "arguments"} {
			w.copyColumn(t, "decisions", col, "run_id = ?", []any{d1.RunID}, []any{d2.RunID})
		}
		decided, err := eng.DecidedBy(ctx, d2.RunID, w.approver)
		if err != nil {
			t.Fatal(err)
		}
		if !unreadable(decided.Decision.Reason, "MARKER") {
			t.Errorf("the reason of run %d's decision, copied from run %d's, reads %q; want it unreadable", d2.RunID, d1.RunID, decided.Decision.Reason)
		}
		stop := testrig.Work(t, eng, 1, 10*time.Millisecond)
		w.WaitStatus(t, d1.RunID, runtime.StatusCompleted, 10*time.Second)
		r2 := w.WaitRun(t, d2.RunID, 10*time.Second, "settled", func(r *runtime.Run) bool { return r.Status.Terminal() })
		stop()
		if r2.Status != runtime.StatusFailed || r2.TerminationReason != runtime.ReasonUnreadable {
			t.Errorf("run %d with run %d's edited arguments: %s (%s), want failed with unreadable_state", d2.RunID, d1.RunID, r2.Status, r2.TerminationReason)
		}
		if n := w.Refunds(t, order2); n != 0 {
			t.Errorf("order %s of run %d was refunded %d times, want never", order2, d2.RunID, n)
		}
		if n := w.Refunds(t, order1); n != 1 {
			t.Errorf("order %s of run %d was refunded %d times, want once (its own edit)", order1, d1.RunID, n)
		}
	})
}

// TestPlainContentIsRefusedWithKeys: with state keys set, plain content
// in a sealed column — a run stored before keys were set, or text written
// there with SQL — is not taken for the run's: pages and the API show it
// as unreadable, a decision on a plain state is refused with
// unreadable_state and writes nothing, and a worker applies no plain
// decision (it leaves the run as it is, for state reseal).
func TestPlainContentIsRefusedWithKeys(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	keyed := w.engineWithLease(t, entry("A", keyA), 300*time.Millisecond)

	plain := w.waiting(t, w.engine(t, ""))
	before := w.State(t, plain.RunID)
	if _, err := w.approve(keyed, plain); runtime.CodeOf(err) != runtime.CodeUnreadableState {
		t.Errorf("decide a run stored plain, with keys = %v; want unreadable_state", err)
	}
	w.Unchanged(t, plain.RunID, before)
	run, _, err := keyed.Visible(ctx, plain.RunID, w.owner)
	if err != nil {
		t.Fatal(err)
	}
	if !unreadable(run.Prompt, "Please refund") {
		t.Errorf("a plain prompt read with keys = %q, want it unreadable", run.Prompt)
	}

	done := w.waiting(t, keyed)
	if out, err := w.approve(keyed, done); err != nil || out.Status != runtime.StatusCompleted {
		t.Fatalf("run %d: %v, %v; want completed", done.RunID, out.Status, err)
	}
	if _, err := w.DB.Exec(`UPDATE runs SET answer = 'PLAIN-ANSWER' WHERE id = ?`, done.RunID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.DB.Exec(`UPDATE run_events SET payload = '{"forged":"PLAIN-PAYLOAD"}' WHERE run_id = ? AND seq = 1`, done.RunID); err != nil {
		t.Fatal(err)
	}
	run, _, err = keyed.Visible(ctx, done.RunID, w.owner)
	if err != nil {
		t.Fatal(err)
	}
	if !unreadable(run.Answer, "PLAIN") {
		t.Errorf("a plain answer written over a sealed one reads %q, want it unreadable", run.Answer)
	}
	evs, err := keyed.Events(ctx, done.RunID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) == 0 || !unreadable(string(evs[0].Payload), "PLAIN") {
		t.Errorf("a plain event payload reads %s, want it unreadable", evs[0].Payload)
	}

	// A durable approval whose edited arguments are replaced by plain ones:
	// the worker must not refund what the plain text says.
	paused, order := w.Start(t, testrig.Launch{Configuration: "refund", Engine: keyed})
	if paused.Status != runtime.StatusWaitingForApproval || paused.Pending.Calls[0].Name != "refund_order" {
		t.Fatalf("run %d waits on %s, want refund_order", paused.RunID, paused.Pending.Calls[0].Name)
	}
	if _, err := keyed.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest, Decision: runtime.DecisionApprove,
		Actor: w.approver, Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	forged := fmt.Sprintf(`{%q:{"order_id":%q,"amount_cents":999,"reason":"forged"}}`, paused.Pending.Calls[0].ID, order)
	if _, err := w.DB.Exec(`UPDATE decisions SET arguments = ? WHERE run_id = ?`, forged, paused.RunID); err != nil {
		t.Fatal(err)
	}
	events := w.State(t, paused.RunID).Events
	stop := testrig.Work(t, keyed, 1, 10*time.Millisecond)
	w.WaitRun(t, paused.RunID, 10*time.Second, "claimed by the worker", func(r *runtime.Run) bool {
		return r.Status == runtime.StatusRunning && r.ClaimedBy != ""
	})
	stop()
	if n := w.Count(t, `SELECT COUNT(*) FROM demo_refunds WHERE order_id = ?`, order); n != 0 {
		t.Errorf("order %s was refunded %d times after plain arguments were written into its decision, want never", order, n)
	}
	if st := w.State(t, paused.RunID); st.Run.Status.Terminal() || st.Events != events {
		t.Errorf("run %d with plain decision arguments: %s with %d events, want it left unsettled with its %d events",
			paused.RunID, st.Run.Status, st.Events, events)
	}
	if bytes.Contains(w.Run(t, paused.RunID).State, []byte("forged")) {
		t.Errorf("the forged arguments reached the state")
	}
}
