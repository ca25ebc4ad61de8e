package seal_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/config"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
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
	db              *sqlx.DB
	st              *store.Store
	tools           map[string]runtime.Tool
	owner, approver runtime.Actor
	orders          int
}

func newWorld(t *testing.T) *world {
	t.Helper()
	db, _ := dbtest.New(t)
	st := store.New(db)
	w := &world{db: db, st: st, tools: builtin.Registry(builtin.Tools(st)...)}
	ctx := context.Background()
	cfg, err := config.Parse("refund.yaml", []byte(refundYAML), func(n string) bool { _, ok := w.tools[n]; return ok })
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SaveConfiguration(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, u := range []*store.User{{Name: "owner", Role: runtime.RoleUser}, {Name: "approver", Role: runtime.RoleUser, Grants: []string{runtime.GrantApprove}}} {
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	owner, _ := st.UserByName(ctx, "owner")
	approver, _ := st.UserByName(ctx, "approver")
	w.owner, w.approver = owner.Actor(), approver.Actor()
	return w
}

// engine is a process on the world's database with these keys; spec ""
// stores plain JSON.
func (w *world) engine(t *testing.T, spec string) *runtime.Engine {
	t.Helper()
	var sealer runtime.Sealer
	if spec != "" {
		sealer = keyring(t, spec)
	}
	return runtime.New(runtime.Options{Store: w.st, Tools: w.tools, Providers: scripted.Factory,
		Validator: schema.New(), Sealer: sealer})
}

// waiting starts a refund run on a new order and runs it until it pauses
// on refund_order.
func (w *world) waiting(t *testing.T, eng *runtime.Engine) runtime.Outcome {
	t.Helper()
	ctx := context.Background()
	w.orders++
	order := fmt.Sprintf("S-%d", w.orders)
	if err := w.st.CreateDemoOrder(ctx, builtin.Order{ID: order, Customer: "Test", AmountCents: 1000, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	c, err := eng.Start(ctx, runtime.StartRequest{Configuration: "refund", Prompt: "Please refund " + order, Owner: w.owner})
	if err != nil {
		t.Fatal(err)
	}
	out := c.Run(ctx, nil)
	if out.Err != nil || out.Status != runtime.StatusWaitingForApproval {
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

// row is what a refused decision must leave alone.
type row struct {
	Status     string  `db:"status"`
	TurnDigest *string `db:"turn_digest"`
	State      []byte  `db:"state"`
	ClaimedBy  *string `db:"claimed_by"`
	UpdatedAt  string  `db:"updated_at"`
	Decisions  int     `db:"decisions"`
	Events     int     `db:"events"`
}

func (w *world) row(t *testing.T, id int64) row {
	t.Helper()
	var r row
	err := w.db.Get(&r, `SELECT status, turn_digest, state, claimed_by, CAST(updated_at AS CHAR) AS updated_at,
		(SELECT COUNT(*) FROM decisions WHERE run_id = runs.id) AS decisions,
		(SELECT COUNT(*) FROM run_events WHERE run_id = runs.id) AS events
		FROM runs WHERE id = ?`, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sealedUnder requires the run's state and every transcript message to be
// sealed under the key id.
func (w *world) sealedUnder(t *testing.T, id int64, keyID string) {
	t.Helper()
	var bodies [][]byte
	if err := w.db.Select(&bodies, `SELECT body FROM run_messages WHERE run_id = ? ORDER BY idx`, id); err != nil {
		t.Fatal(err)
	}
	blobs := append(bodies, w.row(t, id).State)
	for i, b := range blobs {
		if got, ok := sealedID(b); got != keyID {
			t.Errorf("run %d blob %d: sealed under %q (%v), want %q; starts %q", id, i, got, ok, keyID, b[:min(len(b), 16)])
		}
		if bytes.Contains(b, []byte("SEALED-MARKER")) || bytes.Contains(b, []byte("Please refund")) {
			t.Errorf("run %d blob %d holds plain run content", id, i)
		}
	}
}

func sealedID(b []byte) (string, bool) {
	if !bytes.HasPrefix(b, []byte("tse1:")) {
		return "", false
	}
	id, _, ok := bytes.Cut(b[len("tse1:"):], []byte(":"))
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
	if err := w.db.Get(&state, `SELECT state FROM runs WHERE id = ?`, first.RunID); err != nil {
		t.Fatal(err)
	}
	if id, _ := sealedID(state); id != "B" {
		t.Errorf("state after the rotation is sealed under %q, want B", id)
	}

	before := w.row(t, second.RunID)
	onlyB := w.engine(t, specB)
	_, err = w.approve(onlyB, second)
	if got := runtime.CodeOf(err); got != runtime.CodeUnreadableState {
		t.Fatalf("decide under B alone = %v, want unreadable_state", err)
	}
	after := w.row(t, second.RunID)
	if !reflect.DeepEqual(before, after) {
		t.Errorf("the refused decision changed run %d:\nbefore %s %v %q %s decisions=%d events=%d\nafter  %s %v %q %s decisions=%d events=%d",
			second.RunID, before.Status, before.ClaimedBy, before.State[:12], before.UpdatedAt, before.Decisions, before.Events,
			after.Status, after.ClaimedBy, after.State[:12], after.UpdatedAt, after.Decisions, after.Events)
	}

	// The keys come back: the run is still there to decide.
	if out, err := w.approve(rotated, second); err != nil || out.Status != runtime.StatusCompleted {
		t.Errorf("decide under B,A after the refusal = %v, %v; want completed", out.Status, err)
	}
}

// TestPlainRunsOpenAfterKeysAreSet: runs written before any key was set
// are plain JSON; they resume once keys are configured and are sealed from
// their next write on.
func TestPlainRunsOpenAfterKeysAreSet(t *testing.T) {
	w := newWorld(t)
	plain := w.waiting(t, w.engine(t, ""))
	if st := w.row(t, plain.RunID).State; !bytes.HasPrefix(st, []byte("{")) {
		t.Fatalf("state without keys starts %q, want plain JSON", st[:min(len(st), 16)])
	}
	out, err := w.approve(w.engine(t, entry("A", keyA)), plain)
	if err != nil || out.Status != runtime.StatusCompleted {
		t.Fatalf("decide a plain run under A = %v, %v; want completed", out.Status, err)
	}
	if id, _ := sealedID(w.row(t, plain.RunID).State); id != "A" {
		t.Errorf("state after the first write under A is sealed under %q, want A", id)
	}

	// The reverse is refused: a process without keys cannot read sealed runs.
	sealed := w.waiting(t, w.engine(t, entry("A", keyA)))
	if _, err := w.approve(w.engine(t, ""), sealed); runtime.CodeOf(err) != runtime.CodeUnreadableState {
		t.Errorf("decide a sealed run without keys = %v, want unreadable_state", err)
	}
}
