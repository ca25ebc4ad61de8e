package testrig_test

import (
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

const refundYAML = `
identifier: refund
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - text: "Refunded."
tools: [refund_order]
`

// TestWorldStartsAndDecidesRuns: a world's run waits on a fresh order of
// the template; Unchanged holds while nothing moves and names what moved
// once the run is approved; the counting helpers see the decision, the
// refund and gapless events.
func TestWorldStartsAndDecidesRuns(t *testing.T) {
	w := testrig.New(t, testrig.Configs(refundYAML), testrig.PasswordHash("HASH"),
		testrig.User("refunder", runtime.RoleUser, "refunds"),
		testrig.Orders(builtin.Order{ID: "Q-", Customer: "Test", AmountCents: 700, Currency: "EUR"}))
	for _, name := range []string{"owner", "approver", "other", "admin", "refunder"} {
		if u := w.Users[name]; u == nil || u.ID == 0 || u.PasswordHash != "HASH" {
			t.Errorf("user %s = %+v, want one stored with the hash", name, u)
		}
	}
	paused, order := w.Waiting(t, "refund")
	if order != "Q-1001" {
		t.Errorf("first order = %q, want Q-1001", order)
	}
	if got := w.Run(t, paused.RunID); got.OwnerID != w.Users["owner"].ID || !strings.Contains(got.Prompt, order) {
		t.Errorf("run = owner %d, prompt %q; want the owner's, naming %s", got.OwnerID, got.Prompt, order)
	}

	before := w.State(t, paused.RunID)
	if got := failures(t, func(tb testing.TB) { w.Unchanged(tb, paused.RunID, before) }); len(got) != 0 {
		t.Errorf("Unchanged with nothing moved failed: %q", got)
	}
	if out := w.Approve(t, paused); out.Status != runtime.StatusCompleted {
		t.Fatalf("after the approval: %s, want completed", out.Status)
	}
	got := failures(t, func(tb testing.TB) { w.Unchanged(tb, paused.RunID, before) })
	if len(got) != 1 || !strings.Contains(got[0], "run.Status waiting_for_approval → completed") ||
		!strings.Contains(got[0], "Decisions 0 → 1") || !strings.Contains(got[0], "Refunds 0 → 1") {
		t.Errorf("Unchanged after an approval failed %q, want the status, decision and refund named", got)
	}

	if n := w.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
	ds := w.Decisions(t, paused.RunID)
	if len(ds) != 1 || ds[0].Digest != paused.Digest || !ds[0].Executed || ds[0].Outcome != "completed" {
		t.Errorf("decisions = %+v, want the approval, executed, completed", ds)
	}
	evs := w.Gapless(t, paused.RunID)
	if testrig.CountKind(evs, runtime.KindApproval) != 1 || testrig.CountKind(evs, runtime.KindSettle) != 1 {
		t.Errorf("events = %+v, want one approval and one settle", evs)
	}
	if n := w.Count(t, `SELECT COUNT(*) FROM runs`); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
	if r := w.WaitStatus(t, paused.RunID, runtime.StatusCompleted, time.Second); r.ID != paused.RunID {
		t.Errorf("WaitStatus = run %d, want %d", r.ID, paused.RunID)
	}
}

// TestWorldWorkers: a durable decision is carried out by Work's loops,
// and WaitRun fails the test, naming the wait, when the run never gets
// there.
func TestWorldWorkers(t *testing.T) {
	w := testrig.New(t, testrig.Configs(refundYAML), testrig.Prompt("Refund %s now"))
	paused, order := w.Waiting(t, "refund")
	if _, err := w.Engine.Decide(t.Context(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: w.Actor("approver"), Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	stop := testrig.Work(t, w.NewEngine(runtime.Options{}), 1, 10*time.Millisecond)
	w.WaitStatus(t, paused.RunID, runtime.StatusCompleted, 10*time.Second)
	stop()
	if n := w.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
	got := failures(t, func(tb testing.TB) {
		w.WaitStatus(tb, paused.RunID, runtime.StatusFailed, 50*time.Millisecond)
	})
	if len(got) != 1 || !strings.Contains(got[0], "did not become failed") {
		t.Errorf("WaitStatus for a status the run never has failed %q, want once, naming it", got)
	}
}
