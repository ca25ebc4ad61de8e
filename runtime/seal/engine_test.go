package seal_test

import (
	"bytes"
	"context"
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
      - text: "Looking the order up."
        tool_calls:
          - name: lookup_order
            arguments: {order_id: "${order_id}"}
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}", reason: "SEALED-MARKER"}
      - text: "Refunded."
tools: [lookup_order, refund_order]
`

// world is a database with the refund configuration, its tools, an owner
// and an approver; engines are processes on it, each with its own keys.
type world struct {
	*testrig.World
	owner, approver runtime.Actor
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := testrig.New(t, testrig.Configs(refundYAML),
		testrig.Orders(builtin.Order{ID: "S-", Customer: "Test", AmountCents: 1000, Currency: "EUR"}))
	return &world{World: w, owner: w.Actor("owner"), approver: w.Actor("approver")}
}

// engine is a process on the world's database with these keys; spec ""
// stores plain JSON.
func (w *world) engine(t *testing.T, spec string) *runtime.Engine {
	return w.engineWithLease(t, spec, 0)
}

// engineWithLease is engine with a lease of its own (the default when 0).
func (w *world) engineWithLease(t *testing.T, spec string, lease time.Duration) *runtime.Engine {
	t.Helper()
	var sealer runtime.Sealer
	if spec != "" {
		sealer = keyring(t, spec)
	}
	return w.NewEngine(runtime.Options{Sealer: sealer, Lease: lease})
}

// waiting starts a refund run on a new order and runs it until it pauses
// on refund_order.
func (w *world) waiting(t *testing.T, eng *runtime.Engine) runtime.Outcome {
	t.Helper()
	out, _ := w.Start(t, testrig.Launch{Configuration: "refund", Engine: eng})
	if out.Status != runtime.StatusWaitingForApproval {
		t.Fatalf("run %d: %s, %v; want it waiting for approval", out.RunID, out.Status, out.Err)
	}
	return out
}

// approve decides a waiting run on the request path and runs the
// continuation.
func (w *world) approve(eng *runtime.Engine, out runtime.Outcome) (runtime.Outcome, error) {
	ctx := context.Background()
	c, err := eng.Decide(ctx, runtime.DecideRequest{RunID: out.RunID, Digest: out.Digest, Decision: runtime.DecisionApprove,
		Actor: w.approver, Path: runtime.PathRequest})
	if err != nil {
		return runtime.Outcome{}, err
	}
	return c.Run(ctx, nil), nil
}

// sealedUnder requires the run's state and every transcript message to be
// sealed under the key id.
func (w *world) sealedUnder(t *testing.T, id int64, keyID string) {
	t.Helper()
	var bodies [][]byte
	if err := w.DB.Select(&bodies, `SELECT body FROM run_messages WHERE run_id = ? ORDER BY idx`, id); err != nil {
		t.Fatal(err)
	}
	blobs := append(bodies, w.Run(t, id).State)
	for i, b := range blobs {
		if got, ok := sealedID(b); got != keyID {
			t.Errorf("run %d blob %d: sealed under %q (%v), want %q; starts %q", id, i, got, ok, keyID, b[:min(len(b), 16)])
		}
		if bytes.Contains(b, []byte("SEALED-MARKER")) || bytes.Contains(b, []byte("Please refund")) {
			t.Errorf("run %d blob %d holds plain run content", id, i)
		}
	}
}

// sealedID is the key a blob of the current format was sealed under.
func sealedID(b []byte) (string, bool) {
	if !bytes.HasPrefix(b, []byte("tse2:")) {
		return "", false
	}
	id, _, ok := bytes.Cut(b[len("tse2:"):], []byte(":"))
	return string(id), ok
}

// TestKeyRotation: a run suspended under key A resumes after B is put in
// front of A, and what it writes then is sealed under B; a process that
// holds only B refuses to decide a run sealed under A with
// unreadable_state and writes nothing.
func TestKeyRotation(t *testing.T) {
	w := newWorld(t)
	specA := entry("A", keyA)
	specB := entry("B", keyB)
	underA := w.engine(t, specA)
	first := w.waiting(t, underA)
	second := w.waiting(t, underA)
	w.sealedUnder(t, first.RunID, "A")

	rotated := w.engine(t, specB+","+specA)
	out, err := w.approve(rotated, first)
	if err != nil {
		t.Fatalf("decide under B,A: %v", err)
	}
	if out.Status != runtime.StatusCompleted || out.Answer != "Refunded." {
		t.Fatalf("run %d after approval under B,A: %s %q (%v), want completed", out.RunID, out.Status, out.Answer, out.Err)
	}
	var state []byte
	if err := w.DB.Get(&state, `SELECT state FROM runs WHERE id = ?`, first.RunID); err != nil {
		t.Fatal(err)
	}
	if id, _ := sealedID(state); id != "B" {
		t.Errorf("state after the rotation is sealed under %q, want B", id)
	}

	before := w.State(t, second.RunID)
	onlyB := w.engine(t, specB)
	_, err = w.approve(onlyB, second)
	if got := runtime.CodeOf(err); got != runtime.CodeUnreadableState {
		t.Fatalf("decide under B alone = %v, want unreadable_state", err)
	}
	w.Unchanged(t, second.RunID, before)

	// The keys come back: the run is still there to decide.
	if out, err := w.approve(rotated, second); err != nil || out.Status != runtime.StatusCompleted {
		t.Errorf("decide under B,A after the refusal = %v, %v; want completed", out.Status, err)
	}
}

// TestSealedRunsAreRefusedWithoutKeys: a process without keys cannot read
// sealed runs (and runs stored plain are refused by one with keys: see
// TestPlainContentIsRefusedWithKeys).
func TestSealedRunsAreRefusedWithoutKeys(t *testing.T) {
	w := newWorld(t)
	sealed := w.waiting(t, w.engine(t, entry("A", keyA)))
	if _, err := w.approve(w.engine(t, ""), sealed); runtime.CodeOf(err) != runtime.CodeUnreadableState {
		t.Errorf("decide a sealed run without keys = %v, want unreadable_state", err)
	}
}

// TestWorkersLeaveRunsSealedUnderAKeyTheyLack: two decided runs sealed
// under A — one whole, one whose state alone was sealed again under B, so
// that only its transcript needs A — are claimed by a worker that holds
// only B, then by one with no keys at all. Neither settles them or records
// a step: the runs are only not theirs to read, and their claims lapse
// with the lease. A worker that holds A and B then recovers both and
// finishes them, refunding each order once.
func TestWorkersLeaveRunsSealedUnderAKeyTheyLack(t *testing.T) {
	w := newWorld(t)
	const lease = 300 * time.Millisecond
	ringA := keyring(t, entry("A", keyA))
	ringB := keyring(t, entry("B", keyB))
	underA := w.engineWithLease(t, entry("A", keyA), lease)
	var runs []int64
	events := map[int64]int{}
	for i := range 2 {
		paused := w.waiting(t, underA)
		if _, err := underA.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
			Decision: runtime.DecisionApprove, Actor: w.approver, Path: runtime.PathDurable}); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			at := runtime.RunPlace("state", paused.RunID)
			plain, err := ringA.Open(w.Run(t, paused.RunID).State, at)
			if err != nil {
				t.Fatal(err)
			}
			underB, err := ringB.Seal(plain, at)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.DB.Exec(`UPDATE runs SET state = ? WHERE id = ?`, underB, paused.RunID); err != nil {
				t.Fatal(err)
			}
		}
		runs = append(runs, paused.RunID)
		events[paused.RunID] = w.State(t, paused.RunID).Events
	}

	// work runs a worker until every run is running under a claim other
	// than the one it had before, or they all settled.
	work := func(eng *runtime.Engine, until func(map[int64]*runtime.Run) bool) {
		t.Helper()
		defer testrig.Work(t, eng, 1, 10*time.Millisecond)()
		rows := map[int64]*runtime.Run{}
		if !testrig.Eventually(20*time.Second, func() bool {
			for _, id := range runs {
				rows[id] = w.Run(t, id)
			}
			return until(rows)
		}) {
			t.Fatalf("the worker did not get there: %+v", rows)
		}
	}
	for name, spec := range map[string]string{"a worker with only B": entry("B", keyB), "a worker without keys": ""} {
		before := map[int64]string{}
		for _, id := range runs {
			before[id] = w.Run(t, id).ClaimedBy
		}
		work(w.engineWithLease(t, spec, lease), func(rows map[int64]*runtime.Run) bool {
			for id, r := range rows {
				if r.Status != runtime.StatusDecided && r.Status != runtime.StatusRunning {
					t.Fatalf("%s: run %d is %s, want it left decided or running", name, id, r.Status)
				}
				if r.Status != runtime.StatusRunning || r.ClaimedBy == "" || (before[id] != "" && r.ClaimedBy == before[id]) {
					return false
				}
			}
			return true
		})
		for _, id := range runs {
			if r := w.State(t, id); r.Run.Status != runtime.StatusRunning || r.Events != events[id] {
				t.Fatalf("%s: run %d is %s with %d events, want it running with its %d events untouched",
					name, id, r.Run.Status, r.Events, events[id])
			}
		}
	}

	work(w.engineWithLease(t, entry("A", keyA)+","+entry("B", keyB), lease), func(rows map[int64]*runtime.Run) bool {
		for _, r := range rows {
			if r.Status != runtime.StatusCompleted {
				return false
			}
		}
		return true
	})
	if refunds := w.Count(t, `SELECT COUNT(*) FROM demo_refunds`); refunds != 2 {
		t.Errorf("%d refunds for 2 runs, want 2", refunds)
	}
}
