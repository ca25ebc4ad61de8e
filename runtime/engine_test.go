package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

func TestApproveContinuesTheRunToTheEnd(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, order := f.Waiting(t, "refund")
	if paused.Status != runtime.StatusWaitingForApproval || len(paused.Pending.Calls) != 1 || paused.Pending.Calls[0].Name != "refund_order" {
		t.Fatalf("paused = %+v, want waiting on refund_order", paused)
	}
	var seen []runtime.EventKind
	c, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver})
	if err != nil {
		t.Fatal(err)
	}
	out := c.Run(context.Background(), runtime.ObserverFunc(func(s runtime.Step) { seen = append(seen, s.Kind) }))
	if out.Status != runtime.StatusCompleted || out.Reason != runtime.ReasonCompleted {
		t.Fatalf("outcome = %+v, want completed", out)
	}
	want := []runtime.EventKind{runtime.KindApproval, runtime.KindTool, runtime.KindLLM, runtime.KindSettle}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("observed steps = %v, want %v", seen, want)
	}
	if got := f.Refunds(t, order); got != 1 {
		t.Errorf("refunds of %s = %d, want 1", order, got)
	}
	evs := f.Events(t, out.RunID)
	for i, e := range evs {
		if e.Seq != i+1 {
			t.Fatalf("event %d has seq %d: the log has a gap or a duplicate", i, e.Seq)
		}
	}
	var executed, outcome *string
	row := f.DB.QueryRowx(`SELECT executed_at IS NOT NULL, outcome FROM decisions WHERE run_id = ?`, out.RunID)
	var wasExecuted bool
	if err := row.Scan(&wasExecuted, &outcome); err != nil {
		t.Fatal(err)
	}
	_ = executed
	if !wasExecuted || outcome == nil || *outcome != "completed" {
		t.Errorf("decision executed=%v outcome=%v, want executed and completed", wasExecuted, outcome)
	}
}

func TestDenialIsAToolResultTheModelSees(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, order := f.Waiting(t, "refund")
	out := f.Decide(t, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionDeny, Reason: "not eligible", Actor: f.approver})
	if out.Status != runtime.StatusCompleted {
		t.Fatalf("status = %s, want completed", out.Status)
	}
	if got := f.Refunds(t, order); got != 0 {
		t.Errorf("refunds = %d after a denial, want 0", got)
	}
	res, err := f.Store.Resume(context.Background(), out.RunID, true)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	var msgs []runtime.Message
	for _, b := range res.Messages {
		var m runtime.Message
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
		if m.Role == "tool" && m.ToolName == "refund_order" {
			found = m.Content == "denied by approver: not eligible" && m.IsError
		}
	}
	if !found {
		t.Errorf("the transcript has no denial result for refund_order: %+v", msgs)
	}
}

func TestRefusalsWriteNothing(t *testing.T) {
	offYAML := strings.Replace(refundYAML, "identifier: refund", "identifier: switched-off", 1)
	f := newFixture(t, 0, refundYAML, fourEyesYAML, grantYAML, inputYAML, offYAML)
	ctx := context.Background()
	approval := func(cfg string) runtime.Outcome { out, _ := f.Waiting(t, cfg); return out }
	completed := approval("refund")
	f.Decide(t, runtime.DecideRequest{RunID: completed.RunID, Digest: completed.Digest, Actor: f.owner})
	cancelled := approval("refund")
	if _, err := f.Engine.Cancel(ctx, cancelled.RunID, f.owner); err != nil {
		t.Fatal(err)
	}
	process, _ := f.start(t, "refund", runtime.OriginProcess)
	inactive := approval("switched-off")
	unreadable := approval("refund")
	input := approval("input")
	fourEyes := approval("four-eyes")
	granted := approval("granted")
	plain := approval("refund")

	cases := []struct {
		name string
		run  runtime.Outcome
		call func(runtime.Outcome) error
		want runtime.Code
	}{
		{"unknown run", plain, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: 999999, Digest: o.Digest, Decision: "approve", Actor: f.admin})
			return err
		}, runtime.CodeNotFound},
		{"settled run", cancelled, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "approve", Actor: f.admin})
			return err
		}, runtime.CodeNotWaiting},
		{"a turn decided before the run settled", completed, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "approve", Actor: f.admin})
			return err
		}, runtime.CodeAlreadyResuming},
		{"approval of an input turn", input, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "approve", Actor: f.admin})
			return err
		}, runtime.CodeNotWaiting},
		{"someone without the grant", plain, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "approve", Actor: f.other})
			return err
		}, runtime.CodeNotFound},
		{"process run in the inbox", process, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "approve", Actor: f.approver, Inbox: true})
			return err
		}, runtime.CodeProcessRun},
		{"inactive configuration", inactive, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "approve", Actor: f.approver})
			return err
		}, runtime.CodeInactiveConfiguration},
		{"four eyes", fourEyes, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "approve", Actor: f.owner})
			return err
		}, runtime.CodeFourEyes},
		{"unreadable state", unreadable, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "approve", Actor: f.approver})
			return err
		}, runtime.CodeUnreadableState},
		{"approver without the tool's grant", granted, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "approve", Actor: f.approver})
			return err
		}, runtime.CodeApproverNotPermitted},
		{"input that fails the schema", input, func(o runtime.Outcome) error {
			_, err := f.Engine.SubmitInput(ctx, runtime.InputRequest{RunID: o.RunID, Digest: o.Digest, Input: json.RawMessage(`{"amount":0}`), Actor: f.approver})
			return err
		}, runtime.CodeInvalidInput},
		{"input that is no JSON", input, func(o runtime.Outcome) error {
			_, err := f.Engine.SubmitInput(ctx, runtime.InputRequest{RunID: o.RunID, Digest: o.Digest, Input: json.RawMessage(`{"amount":`), Actor: f.approver})
			return err
		}, runtime.CodeInvalidInput},
		{"tampered digest", plain, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: strings.Repeat("0", 64), Decision: "approve", Actor: f.approver})
			return err
		}, runtime.CodeStaleTurn},
		{"malformed digest", plain, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: "'; DROP TABLE runs; --", Decision: "approve", Actor: f.approver})
			return err
		}, runtime.CodeStaleTurn},
		{"missing digest", plain, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Decision: "approve", Actor: f.approver})
			return err
		}, runtime.CodeStaleTurn},
		{"unknown decision", plain, func(o runtime.Outcome) error {
			_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "maybe", Actor: f.approver})
			return err
		}, runtime.CodeInvalidRequest},
	}
	if err := f.Store.SetConfigurationActive(ctx, f.Run(t, inactive.RunID).ConfigurationID, false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.DB.Exec(`UPDATE runs SET state = 'not json' WHERE id = ?`, unreadable.RunID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.State(t, tc.run.RunID)
			err := tc.call(tc.run)
			if got := runtime.CodeOf(err); got != tc.want {
				t.Fatalf("refusal = %q (%v), want %q", got, err, tc.want)
			}
			f.Unchanged(t, tc.run.RunID, before)
		})
	}
	t.Run("field messages of invalid input", func(t *testing.T) {
		_, err := f.Engine.SubmitInput(ctx, runtime.InputRequest{RunID: input.RunID, Digest: input.Digest,
			Input: json.RawMessage(`{"amount":0}`), Actor: f.approver})
		var r *runtime.Refusal
		if !errors.As(err, &r) || r.Fields["amount"] == "" {
			t.Errorf("refusal = %+v, want a message for the field amount", err)
		}
	})
	t.Run("stale turn names the current digest", func(t *testing.T) {
		_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: plain.RunID, Digest: "x", Decision: "approve", Actor: f.approver})
		var r *runtime.Refusal
		if !errors.As(err, &r) || r.Digest != plain.Digest {
			t.Errorf("refusal = %+v, want the current digest %s", err, plain.Digest)
		}
	})
}

func TestFourEyesLetsTheInitiatorDenyAndAnotherApprove(t *testing.T) {
	f := newFixture(t, 0, fourEyesYAML)
	denied, _ := f.Waiting(t, "four-eyes")
	if out := f.Decide(t, runtime.DecideRequest{RunID: denied.RunID, Digest: denied.Digest, Decision: runtime.DecisionDeny, Actor: f.owner}); out.Status != runtime.StatusCompleted {
		t.Errorf("the initiator's denial: status %s, want completed", out.Status)
	}
	approved, order := f.Waiting(t, "four-eyes")
	f.Decide(t, runtime.DecideRequest{RunID: approved.RunID, Digest: approved.Digest, Actor: f.approver})
	if got := f.Refunds(t, order); got != 1 {
		t.Errorf("refunds after a second person's approval = %d, want 1", got)
	}
}

func TestInputAnswersTheTool(t *testing.T) {
	f := newFixture(t, 0, inputYAML)
	paused, _ := f.Waiting(t, "input")
	if paused.Status != runtime.StatusWaitingForInput || len(paused.Pending.Schema) == 0 {
		t.Fatalf("paused = %+v, want waiting for input with a schema", paused)
	}
	c, err := f.Engine.SubmitInput(context.Background(), runtime.InputRequest{RunID: paused.RunID, Digest: paused.Digest,
		Input: json.RawMessage(`{ "note": "SECRET-NOTE",  "amount": 250 }`), Actor: f.approver})
	if err != nil {
		t.Fatal(err)
	}
	if out := c.Run(context.Background(), nil); out.Status != runtime.StatusCompleted {
		t.Fatalf("outcome = %+v, want completed", out)
	}
	// What is stored and what the model reads is the value that was
	// checked, written again, not the bytes as sent.
	const want = `{"amount":250,"note":"SECRET-NOTE"}`
	d, err := f.Store.Decision(context.Background(), paused.RunID, paused.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Input) != want {
		t.Errorf("stored input = %s, want %s", d.Input, want)
	}
	var result string
	if err := f.DB.Get(&result, `SELECT body FROM run_messages WHERE run_id = ? AND body LIKE '%"role":"tool"%' ORDER BY idx DESC LIMIT 1`, paused.RunID); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(result, `"content":"{\"amount\":250,\"note\":\"SECRET-NOTE\"}"`) {
		t.Errorf("the tool result the model reads = %s, want the answer %s", result, want)
	}
	for _, e := range f.Events(t, paused.RunID) {
		if strings.Contains(string(e.Payload), "SECRET-NOTE") {
			t.Errorf("event %d (%s) stores the answer: %s", e.Seq, e.Kind, e.Payload)
		}
	}
}

// TestInputFormIsReadByTheTurnsSchema: an answer posted as a form is read
// by the schema of the turn the pipeline checked, after its other checks:
// a field that does not parse is invalid_input beside the schema's own
// messages, with nothing written; a good one is stored typed.
func TestInputFormIsReadByTheTurnsSchema(t *testing.T) {
	f := newFixture(t, 0, inputYAML)
	ctx := context.Background()
	paused, _ := f.Waiting(t, "input")
	before := f.State(t, paused.RunID)
	_, err := f.Engine.SubmitInput(ctx, runtime.InputRequest{RunID: paused.RunID, Digest: paused.Digest,
		Form: map[string][]string{"turn_digest": {paused.Digest}, "amount": {"lots"}}, Actor: f.owner})
	var ref *runtime.Refusal
	if !asRefusal(err, &ref) || ref.Code != runtime.CodeInvalidInput || ref.Fields["amount"] != "must be a whole number" {
		t.Fatalf("err = %v (%+v), want invalid_input saying amount must be a whole number", err, ref)
	}
	f.Unchanged(t, paused.RunID, before)
	// A stranger's form is refused as a missing run, before it is read.
	if _, err := f.Engine.SubmitInput(ctx, runtime.InputRequest{RunID: paused.RunID, Digest: paused.Digest,
		Form: map[string][]string{"amount": {"lots"}}, Actor: f.other}); runtime.CodeOf(err) != runtime.CodeNotFound {
		t.Errorf("a stranger's form: %v, want not_found", err)
	}
	c, err := f.Engine.SubmitInput(ctx, runtime.InputRequest{RunID: paused.RunID, Digest: paused.Digest,
		Form: map[string][]string{"turn_digest": {paused.Digest}, "amount": {" 250 "}, "note": {"fine"}}, Actor: f.owner})
	if err != nil {
		t.Fatal(err)
	}
	c.Run(ctx, nil)
	d, err := f.Store.Decision(ctx, paused.RunID, paused.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"amount":250,"note":"fine"}`; string(d.Input) != want {
		t.Errorf("stored input = %s, want %s", d.Input, want)
	}
}

// TestTurn: the turn a run waits on, or a refusal that says why there is
// none.
func TestTurn(t *testing.T) {
	f := newFixture(t, 0, inputYAML)
	ctx := context.Background()
	paused, _ := f.Waiting(t, "input")
	turn, err := f.Engine.Turn(ctx, paused.RunID)
	if err != nil || turn.Kind != runtime.TurnInput || len(turn.Schema) == 0 {
		t.Fatalf("Turn = %+v, %v; want the input turn", turn, err)
	}
	if _, err := f.Engine.Turn(ctx, paused.RunID+1000); runtime.CodeOf(err) != runtime.CodeNotFound {
		t.Errorf("Turn of a missing run: %v, want not_found", err)
	}
	if _, err := f.Engine.Cancel(ctx, paused.RunID, f.owner); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Engine.Turn(ctx, paused.RunID); runtime.CodeOf(err) != runtime.CodeNotWaiting {
		t.Errorf("Turn of a cancelled run: %v, want not_waiting", err)
	}
}

// A hundred people press Approve on the same form at once, on a hundred runs:
// exactly one continuation per run, and every order refunded once.
func TestConcurrentDecisionsContinueOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("5,000 racing decisions")
	}
	f := newFixture(t, 0, refundYAML)
	const runs, racers = 100, 100
	type target struct {
		out   runtime.Outcome
		order string
	}
	targets := make([]target, runs)
	for i := range targets {
		out, order := f.Waiting(t, "refund")
		targets[i] = target{out, order}
	}
	var won, resuming, stale, other atomic.Int64
	var wg sync.WaitGroup
	for _, tg := range targets {
		start := make(chan struct{})
		for range racers {
			wg.Go(func() {
				<-start
				c, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: tg.out.RunID,
					Digest: tg.out.Digest, Decision: runtime.DecisionApprove, Actor: f.approver})
				switch runtime.CodeOf(err) {
				case "":
					if err != nil {
						t.Error(err)
						return
					}
					won.Add(1)
					if out := c.Run(context.Background(), nil); out.Status != runtime.StatusCompleted {
						t.Errorf("run %d: %+v", tg.out.RunID, out)
					}
				case runtime.CodeAlreadyResuming:
					resuming.Add(1)
				case runtime.CodeStaleTurn:
					stale.Add(1)
				default:
					other.Add(1)
					t.Errorf("run %d: %v", tg.out.RunID, err)
				}
			})
		}
		close(start)
	}
	wg.Wait()
	if won.Load() != runs || resuming.Load()+stale.Load() != runs*(racers-1) || other.Load() != 0 {
		t.Errorf("won %d, already_resuming %d, stale_turn %d, other %d; want %d wins and %d lost claims",
			won.Load(), resuming.Load(), stale.Load(), other.Load(), runs, runs*(racers-1))
	}
	for _, tg := range targets {
		if got := f.Refunds(t, tg.order); got != 1 {
			t.Errorf("order %s refunded %d times, want 1", tg.order, got)
		}
	}
}

func TestStaleFormAfterANewTurn(t *testing.T) {
	f := newFixture(t, 0, twiceYAML)
	first, _ := f.Waiting(t, "twice")
	second := f.Decide(t, runtime.DecideRequest{RunID: first.RunID, Digest: first.Digest, Actor: f.approver})
	if !second.Status.Waiting() || second.Digest == first.Digest {
		t.Fatalf("after the first approval: %+v, want a new turn with a new digest", second)
	}
	before := f.State(t, first.RunID)
	_, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: first.RunID, Digest: first.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver})
	if got := runtime.CodeOf(err); got != runtime.CodeStaleTurn {
		t.Fatalf("the first turn's form: %v, want stale_turn", err)
	}
	f.Unchanged(t, first.RunID, before)
}

func TestSessionScopeReleasesLaterCallsOfThatRunOnly(t *testing.T) {
	f := newFixture(t, 0, twiceYAML)
	first, order := f.Waiting(t, "twice")
	out := f.Decide(t, runtime.DecideRequest{RunID: first.RunID, Digest: first.Digest, Scope: runtime.ScopeSession, Actor: f.approver})
	if out.Status != runtime.StatusCompleted {
		t.Fatalf("with scope=session the second refund_order paused: %+v", out)
	}
	if got := f.Refunds(t, order); got != 2 {
		t.Errorf("refunds = %d, want the two the script asks for", got)
	}
	other, _ := f.Waiting(t, "twice")
	if other.Status != runtime.StatusWaitingForApproval {
		t.Errorf("another run did not pause on refund_order: %+v", other)
	}
}

func TestClientGoneTheRunStillSettles(t *testing.T) {
	f := newFixture(t, 0, slowYAML)
	paused, order := f.Waiting(t, "slow")
	ctx, cancel := context.WithCancel(context.Background())
	c, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	out := c.Run(ctx, runtime.ObserverFunc(func(runtime.Step) { once.Do(cancel) }))
	if out.Status != runtime.StatusCompleted || out.Err != nil {
		t.Fatalf("outcome = %+v, want completed despite the cancelled context", out)
	}
	if got := f.Refunds(t, order); got != 1 {
		t.Errorf("refunds = %d, want 1", got)
	}
	evs := f.Events(t, paused.RunID)
	var kinds []runtime.EventKind
	// The turn's end rides along with the settle: not a step of its own.
	for _, e := range evs[len(evs)-out.Steps-1:] {
		if e.Kind != runtime.KindTurnEnded {
			kinds = append(kinds, e.Kind)
		}
	}
	want := []runtime.EventKind{runtime.KindApproval, runtime.KindTool, runtime.KindLLM, runtime.KindTool, runtime.KindLLM, runtime.KindSettle}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("recorded steps = %v, want %v", kinds, want)
	}
}

func TestTakenOverLeaseStopsTheOldHolder(t *testing.T) {
	f := newFixture(t, 0, slowYAML)
	paused, _ := f.Waiting(t, "slow")
	c, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var took sync.Once
	var tookAt int
	out := c.Run(ctx, runtime.ObserverFunc(func(s runtime.Step) {
		took.Do(func() {
			// The holder looks dead: its lease ran out, and a worker takes over.
			tookAt = s.Seq
			if _, err := f.DB.Exec(`UPDATE runs SET lease_expires_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, paused.RunID); err != nil {
				t.Error(err)
			}
			if err := f.Store.TakeOver(ctx, paused.RunID, "worker-2", time.Minute); err != nil {
				t.Error(err)
			}
		})
	}))
	if !errors.Is(out.Err, runtime.ErrLeaseLost) || out.Status != runtime.StatusRunning {
		t.Fatalf("outcome = %+v, want stopped with a lost lease", out)
	}
	evs := f.Events(t, paused.RunID)
	if last := evs[len(evs)-1]; last.Seq != tookAt {
		t.Errorf("the old holder recorded step %d (%s) after losing the lease at %d", last.Seq, last.Kind, tookAt)
	}
	r := f.Run(t, paused.RunID)
	if r.Status != runtime.StatusRunning || r.ClaimedBy != "worker-2" {
		t.Errorf("run is %s held by %q, want running held by worker-2", r.Status, r.ClaimedBy)
	}
}

func TestLeaseIsRenewedDuringALongStep(t *testing.T) {
	f := newFixture(t, 150*time.Millisecond, slowYAML)
	paused, _ := f.Waiting(t, "slow")
	c, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan runtime.Outcome)
	go func() { done <- c.Run(context.Background(), nil) }()
	// While the 300 ms rounds run, far longer than the 150 ms lease, no
	// worker may take the run over.
	for {
		select {
		case out := <-done:
			if out.Status != runtime.StatusCompleted {
				t.Fatalf("outcome = %+v, want completed", out)
			}
			return
		default:
		}
		if err := f.Store.TakeOver(context.Background(), paused.RunID, "thief", time.Minute); err == nil {
			t.Fatal("a worker took over a run whose holder was alive")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMetadataPrivacyStoresNoContent(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, _ := f.Waiting(t, "refund")
	f.Decide(t, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest, Actor: f.approver})
	evs := f.Events(t, paused.RunID)
	if len(evs) < 6 {
		t.Fatalf("only %d events", len(evs))
	}
	for _, e := range evs {
		for _, marker := range []string{"MARKER-ARGUMENT", "MARKER-ANSWER", "Test", "5000"} {
			if strings.Contains(string(e.Payload), marker) {
				t.Errorf("event %d (%s) stores %q: %s", e.Seq, e.Kind, marker, e.Payload)
			}
		}
	}
	var sawTool bool
	for _, e := range evs {
		sawTool = sawTool || strings.Contains(string(e.Payload), `"refund_order"`)
	}
	if !sawTool {
		t.Error("no event names the tool refund_order: metadata must keep tool names")
	}
}

func TestCancel(t *testing.T) {
	f := newFixture(t, 0, refundYAML, slowYAML)
	ctx := context.Background()
	t.Run("waiting run at once", func(t *testing.T) {
		paused, _ := f.Waiting(t, "refund")
		if _, err := f.Engine.Cancel(ctx, paused.RunID, f.other); runtime.CodeOf(err) != runtime.CodeNotFound {
			t.Errorf("cancel by another user: %v, want not_found", err)
		}
		res, err := f.Engine.Cancel(ctx, paused.RunID, f.owner)
		if err != nil || res.Status != runtime.StatusCancelled {
			t.Fatalf("cancel = %+v, %v", res, err)
		}
		if r := f.Run(t, paused.RunID); r.Status != runtime.StatusCancelled || r.TerminationReason != runtime.ReasonCancelled {
			t.Errorf("run is %s (%s)", r.Status, r.TerminationReason)
		}
		if _, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest, Decision: "approve", Actor: f.approver}); runtime.CodeOf(err) != runtime.CodeNotWaiting {
			t.Errorf("deciding a cancelled run: %v, want not_waiting", err)
		}
		if _, err := f.Engine.Cancel(ctx, paused.RunID, f.owner); runtime.CodeOf(err) != runtime.CodeNotWaiting {
			t.Errorf("cancelling twice: %v, want not_waiting", err)
		}
	})
	t.Run("running run at the next step boundary", func(t *testing.T) {
		paused, _ := f.Waiting(t, "slow")
		c, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest, Decision: "approve", Actor: f.approver})
		if err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		out := c.Run(ctx, runtime.ObserverFunc(func(runtime.Step) {
			once.Do(func() {
				if res, err := f.Engine.Cancel(ctx, paused.RunID, f.admin); err != nil || res.Status != runtime.StatusRunning {
					t.Errorf("cancel = %+v, %v", res, err)
				}
			})
		}))
		if out.Status != runtime.StatusCancelled {
			t.Fatalf("outcome = %+v, want cancelled", out)
		}
		evs := f.Events(t, paused.RunID)
		if n := len(evs); evs[n-3].Kind != runtime.KindCancel || evs[n-2].Kind != runtime.KindTurnEnded || evs[n-1].Kind != runtime.KindSettle {
			t.Errorf("last events %s, %s, %s; want cancel, turn_ended, settle", evs[n-3].Kind, evs[n-2].Kind, evs[n-1].Kind)
		}
	})
}

func TestMaxIterations(t *testing.T) {
	f := newFixture(t, 0, strings.Replace(refundYAML, "tools: [", "max_iterations: 1\ntools: [", 1))
	out, _ := f.start(t, "refund", runtime.OriginInteractive)
	if out.Status != runtime.StatusFailed || out.Reason != runtime.ReasonMaxIterations {
		t.Errorf("outcome = %+v, want failed with max_iterations", out)
	}
}

// TestPanickingStepReleasesTheLease: a tool that panics unwinds its
// continuation (net/http would recover the handler and serve on). Its
// lease is no longer renewed, so a worker can take the run over once the
// lease lapses; renewed for a dead continuation, it would never lapse.
func TestPanickingStepReleasesTheLease(t *testing.T) {
	const lease = 300 * time.Millisecond
	f := newFixture(t, lease, `
identifier: panics
tools: [panics]
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: panics, arguments: {}}]
      - text: "done"
`)
	ctx := context.Background()
	c, err := f.Engine.Start(ctx, runtime.StartRequest{Configuration: "panics", Prompt: "go", Owner: f.owner})
	if err != nil {
		t.Fatal(err)
	}
	panicked := func() (p any) {
		defer func() { p = recover() }()
		c.Run(ctx, nil)
		return nil
	}()
	if panicked == nil {
		t.Fatal("the continuation did not panic")
	}
	deadline := time.Now().Add(10 * lease)
	for f.Store.TakeOver(ctx, c.RunID(), "worker", time.Minute) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("run %d could not be taken over %s after its continuation died: its lease is still renewed", c.RunID(), 10*lease)
		}
		time.Sleep(lease / 10)
	}
}

// TestPauseCarriesThePreview: a run that pauses on a tool that can preview
// its effect carries the tool's line with the turn, where the decider
// sees it; the stored event keeps it only as content (not at metadata).
func TestPauseCarriesThePreview(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, order := f.Waiting(t, "refund")
	call := paused.Pending.Calls[0]
	want := "Refund 50.00 EUR of " + order + " to Test (MARKER-ARGUMENT)"
	if got := paused.Pending.Previews[call.ID]; got != want {
		t.Errorf("preview = %q, want %q", got, want)
	}
	if n := f.Refunds(t, order); n != 0 {
		t.Errorf("%d refunds after the preview, want none", n)
	}
	evs := f.Gapless(t, paused.RunID)
	last := evs[len(evs)-1]
	if last.Kind != runtime.KindSuspend || strings.Contains(string(last.Payload), "Refund 50.00") ||
		!strings.Contains(string(last.Payload), "previews_bytes") {
		t.Errorf("suspend event = %s, want the preview's size only", last.Payload)
	}
}

// TestAWritesPendingEffectIsClearedByItsStep: the call of a
// non-idempotent write is stamped in pending_effect before it runs, and
// the step that records its result clears it (so that a recovery does not
// take a finished write for an interrupted one); the steps before the
// stamp leave the column alone, and the run's counters are stored by
// every step that changed them.
func TestAWritesPendingEffectIsClearedByItsStep(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, _ := f.Waiting(t, "refund")
	ctx := context.Background()
	c, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		kind       runtime.EventKind
		effect     string
		iterations int
	}
	var steps []seen
	out := c.Run(ctx, runtime.ObserverFunc(func(s runtime.Step) {
		r := f.Run(t, paused.RunID)
		steps = append(steps, seen{s.Kind, r.PendingEffect, r.Iterations})
	}))
	if out.Status != runtime.StatusCompleted {
		t.Fatalf("outcome = %+v, want completed", out)
	}
	tools := 0
	for _, s := range steps {
		if s.effect != "" {
			t.Errorf("after the %s step pending_effect = %q, want it cleared", s.kind, s.effect)
		}
		if s.kind == runtime.KindTool {
			tools++
		}
	}
	if tools != 1 {
		t.Errorf("steps %+v, want one tool step", steps)
	}
	if r := f.Run(t, paused.RunID); r.Iterations != out.Iterations || r.Iterations < 2 {
		t.Errorf("stored iterations = %d, the continuation's %d; want them equal, at least 2", r.Iterations, out.Iterations)
	}
}
