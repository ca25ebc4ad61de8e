package seal_test

import (
	"context"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// perCallYAML pauses on two calls at once, a lookup and a refund, both
// waiting for a person.
const perCallYAML = `
identifier: sealed-percall
name: Sealed per call
privacy_level: full
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - {name: lookup_order, arguments: {order_id: "${order_id}"}}
          - {name: refund_order, arguments: {order_id: "${order_id}"}}
      - text: "Decided."
tools: [lookup_order, refund_order]
tool_policies:
  lookup_order: {requires_approval: true}
`

// TestPerCallReasonsAreSealed: with state keys set, a turn decided call by
// call stores its choices sealed (decisions.calls), no per-call reason is
// plain anywhere, and a worker that holds the key opens them: the lookup
// runs, the refund is denied.
func TestPerCallReasonsAreSealed(t *testing.T) {
	w := newWorld(t)
	w.Configure(t, perCallYAML)
	eng := w.engine(t, entry("A", keyA))
	paused, order := w.Start(t, testrig.Launch{Configuration: "sealed-percall", Engine: eng})
	if paused.Pending == nil || len(paused.Pending.Calls) != 2 {
		t.Fatalf("run is %s on %+v, want it waiting on two calls", paused.Status, paused.Pending)
	}
	lookup, refund := paused.Pending.Calls[0].ID, paused.Pending.Calls[1].ID
	c, err := eng.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Actor: w.approver, Path: runtime.PathDurable, Calls: map[string]runtime.CallDecision{
			lookup: {Decision: runtime.DecisionApprove, Reason: "LOOKUP-REASON-MARKER"},
			refund: {Decision: runtime.DecisionDeny, Reason: "REFUND-REASON-MARKER"}}})
	if c != nil || err != nil {
		t.Fatalf("durable decision = %v, %v; want it recorded for a worker", c, err)
	}
	var stored []byte
	if err := w.DB.Get(&stored, `SELECT calls FROM decisions WHERE run_id = ?`, paused.RunID); err != nil {
		t.Fatal(err)
	}
	if id, ok := sealedID(stored); !ok || id != "A" {
		t.Errorf("decisions.calls starts %q, want it sealed under A", stored[:min(len(stored), 16)])
	}
	stop := testrig.Work(t, eng, 1, 10*time.Millisecond)
	w.WaitStatus(t, paused.RunID, runtime.StatusCompleted, 10*time.Second)
	stop()
	if n := w.Refunds(t, order); n != 0 {
		t.Errorf("refunds = %d, want the worker to have denied the refund", n)
	}
	if n := w.Count(t, `SELECT COUNT(*) FROM run_events WHERE run_id = ? AND kind = 'tool'`, paused.RunID); n != 1 {
		t.Errorf("tool steps = %d, want the lookup's alone", n)
	}
	for _, leak := range w.plainText(t, []string{"LOOKUP-REASON-MARKER", "REFUND-REASON-MARKER"}) {
		t.Error(leak)
	}
}

// TestRuleReasonsAreSealed: with state keys set, a rule's decision stores
// its reason sealed in its place, as a person's does, no copy of it is
// plain, and the history opens it.
func TestRuleReasonsAreSealed(t *testing.T) {
	w := newWorld(t)
	w.Configure(t, `
identifier: sealed-rules
name: Sealed rules
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - {name: refund_order, arguments: {order_id: "${order_id}"}}
      - text: "Decided."
tools: [refund_order]
policy:
  - name: no-refunds
    when: tool == "refund_order"
    then: deny
    reason: RULE-REASON-MARKER
`)
	eng := w.engine(t, entry("A", keyA))
	out, order := w.Start(t, testrig.Launch{Configuration: "sealed-rules", Engine: eng})
	if out.Status != runtime.StatusCompleted || w.Refunds(t, order) != 0 {
		t.Fatalf("run is %s, want the rule to have denied the refund and the run completed", out.Status)
	}
	var stored []byte
	if err := w.DB.Get(&stored, `SELECT reason FROM decisions WHERE run_id = ? AND policy = 'no-refunds'`, out.RunID); err != nil {
		t.Fatal(err)
	}
	if id, ok := sealedID(stored); !ok || id != "A" {
		t.Errorf("the rule's decisions.reason starts %q, want it sealed under A", stored[:min(len(stored), 16)])
	}
	for _, leak := range w.plainText(t, []string{"RULE-REASON-MARKER"}) {
		t.Error(leak)
	}
	page, err := eng.History(context.Background(), w.owner, runtime.RunQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 1 || page.Runs[0].Rule == nil || page.Runs[0].Rule.Reason != "RULE-REASON-MARKER" {
		t.Errorf("the history's rule decision %+v, want no-refunds' reason opened", page.Runs)
	}
}
