package runtime_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

const (
	// expiringYAML denies on its own when nobody decides within a second;
	// its script answers a denial with its if_denied round.
	expiringYAML = `
identifier: expiring
decision_timeout: 1s
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}"}
      - text: "MARKER-REFUNDED"
        if_denied:
          text: "MARKER-NOT-REFUNDED"
tools: [refund_order]
`
	// escalatingYAML re-offers an expired turn to the refunds grant's
	// holders; the deadline is the refund tool's own.
	escalatingYAML = `
identifier: escalating
decision_timeout: 1h
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}"}
      - text: "MARKER-REFUNDED"
        if_denied:
          text: "MARKER-NOT-REFUNDED"
tools: [refund_order]
tool_policies:
  refund_order: {decision_timeout: 2s, on_timeout: escalate, escalate_grant: refunds}
`
)

// decisionRow is a decisions row with what an expiry leaves on it.
type decisionRow struct {
	Digest    string `db:"turn_digest"`
	Kind      string `db:"kind"`
	Reason    string `db:"reason"`
	DecidedBy *int64 `db:"decided_by"`
	Path      string `db:"path"`
	Executed  bool   `db:"executed"`
}

func decisionRows(t *testing.T, f *fixture, runID int64) []decisionRow {
	t.Helper()
	var ds []decisionRow
	if err := f.DB.Select(&ds, `SELECT turn_digest, kind, CAST(reason AS CHAR) AS reason, decided_by, path,
		executed_at IS NOT NULL AS executed FROM decisions WHERE run_id = ? ORDER BY id`, runID); err != nil {
		t.Fatal(err)
	}
	return ds
}

// toolResults are the contents of a run's tool messages, in order.
func toolResults(t *testing.T, f *fixture, runID int64) []string {
	t.Helper()
	var bodies [][]byte
	if err := f.DB.Select(&bodies, `SELECT body FROM run_messages WHERE run_id = ? ORDER BY idx`, runID); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range bodies {
		var m runtime.Message
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

func TestExpiredPauseIsDeniedByNobody(t *testing.T) {
	metrics := &recordingMetrics{}
	f := newFixture(t, 0, expiringYAML)
	paused, order := f.Waiting(t, "expiring")
	r := f.Run(t, paused.RunID)
	if r.DecisionDeadline == nil || r.WaitingSince == nil {
		t.Fatalf("waiting run has deadline %v since %v, want both set", r.DecisionDeadline, r.WaitingSince)
	}
	if got := r.DecisionDeadline.Sub(*r.WaitingSince); got != time.Second {
		t.Errorf("deadline is %s after the pause began, want 1s", got)
	}

	work(t, f.NewEngine(runtime.Options{Metrics: metrics}), 1)
	done := f.WaitStatus(t, paused.RunID, runtime.StatusCompleted, 10*time.Second)
	if done.DecisionDeadline != nil {
		t.Errorf("settled run keeps deadline %v", done.DecisionDeadline)
	}
	ds := decisionRows(t, f, paused.RunID)
	if len(ds) != 1 {
		t.Fatalf("decisions = %+v, want one", ds)
	}
	if d := ds[0]; d.Kind != runtime.DecisionDeny || d.DecidedBy != nil || d.Reason != "no decision within 1s" ||
		d.Path != runtime.PathExpiry || d.Digest != paused.Digest || !d.Executed {
		t.Errorf("decision = %+v, want an executed deny of the paused turn by nobody (NULL), reason %q, path expiry",
			d, "no decision within 1s")
	}
	if got := toolResults(t, f, paused.RunID); len(got) != 1 || got[0] != "no decision within 1s" {
		t.Errorf("tool results = %q, want the model told %q", got, "no decision within 1s")
	}
	var answer string
	if err := f.DB.Get(&answer, `SELECT CAST(answer AS CHAR) FROM runs WHERE id = ?`, paused.RunID); err != nil {
		t.Fatal(err)
	}
	if answer != "MARKER-NOT-REFUNDED" {
		t.Errorf("answer = %q, want the script's if_denied round", answer)
	}
	if n := f.Refunds(t, order); n != 0 {
		t.Errorf("refunds = %d, want none after a denial", n)
	}
	metrics.mu.Lock()
	defer metrics.mu.Unlock()
	if strings.Join(metrics.expired, ",") != runtime.OnTimeoutDeny {
		t.Errorf("expiries counted = %v, want one deny", metrics.expired)
	}
}

// A person's claim clears the deadline: a decided run is never expired.
func TestClaimClearsTheDeadline(t *testing.T) {
	f := newFixture(t, 0, expiringYAML)
	paused, _ := f.Waiting(t, "expiring")
	if _, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver, Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	if r := f.Run(t, paused.RunID); r.DecisionDeadline != nil {
		t.Errorf("decided run keeps deadline %v", r.DecisionDeadline)
	}
}

func TestExpiredPauseEscalatesOnceThenDenies(t *testing.T) {
	metrics := &recordingMetrics{}
	f := newFixture(t, 0, escalatingYAML)
	kept, _ := f.Waiting(t, "escalating")
	approved, order := f.Waiting(t, "escalating")
	if r := f.Run(t, kept.RunID); r.DecisionDeadline == nil || r.DecisionDeadline.Sub(*r.WaitingSince) != 2*time.Second {
		t.Fatalf("deadline %v, want the tool policy's 2s (shorter than the configuration's 1h)", r.DecisionDeadline)
	}
	eng := f.NewEngine(runtime.Options{Metrics: metrics})
	stop := testrig.Work(t, eng, 1, 20*time.Millisecond)
	escalated := func(r *runtime.Run) bool { return r.Status == runtime.StatusWaitingForApproval && r.Turn == 2 }
	first := f.WaitRun(t, kept.RunID, 10*time.Second, "escalated", escalated)
	second := f.WaitRun(t, approved.RunID, 10*time.Second, "escalated", escalated)
	stop() // nothing expires while the test decides

	if first.TurnDigest == kept.Digest || first.DecisionDeadline == nil {
		t.Fatalf("escalated turn has digest %s (was %s) and deadline %v; want a new digest and a fresh deadline",
			first.TurnDigest, kept.Digest, first.DecisionDeadline)
	}
	decide := func(id int64, digest string, who runtime.Actor, decision string) (*runtime.Continuation, error) {
		return f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: id, Digest: digest,
			Decision: decision, Actor: who})
	}
	for _, tc := range []struct {
		name     string
		digest   string
		who      runtime.Actor
		decision string
		want     runtime.Code
	}{
		{"the old form", kept.Digest, f.refunder, runtime.DecisionApprove, runtime.CodeStaleTurn},
		{"an approver without the grant", first.TurnDigest, f.approver, runtime.DecisionApprove, runtime.CodeApproverNotPermitted},
		{"a denial without the grant", first.TurnDigest, f.approver, runtime.DecisionDeny, runtime.CodeApproverNotPermitted},
		{"the owner", first.TurnDigest, f.owner, runtime.DecisionDeny, runtime.CodeApproverNotPermitted},
		{"a stranger", first.TurnDigest, f.other, runtime.DecisionApprove, runtime.CodeNotFound},
	} {
		before := f.State(t, kept.RunID)
		_, err := decide(kept.RunID, tc.digest, tc.who, tc.decision)
		if got := runtime.CodeOf(err); got != tc.want {
			t.Errorf("%s: refusal %q (%v), want %q", tc.name, got, err, tc.want)
		}
		if tc.want == runtime.CodeApproverNotPermitted && (err == nil || !strings.Contains(err.Error(), `"refunds" grant`)) {
			t.Errorf("%s: message %v does not name the grant", tc.name, err)
		}
		f.Unchanged(t, kept.RunID, before)
	}

	// A holder of the grant decides the escalated turn as any turn.
	c, err := decide(approved.RunID, second.TurnDigest, f.refunder, runtime.DecisionApprove)
	if err != nil {
		t.Fatalf("holder's approval: %v", err)
	}
	if out := c.Run(context.Background(), nil); out.Status != runtime.StatusCompleted || out.Answer != "MARKER-REFUNDED" {
		t.Errorf("approved escalated run: %s %q, want completed with the refund", out.Status, out.Answer)
	}
	if n := f.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}

	// Escalated once, an expired turn is denied.
	testrig.Work(t, eng, 1, 20*time.Millisecond)
	f.WaitStatus(t, kept.RunID, runtime.StatusCompleted, 10*time.Second)
	ds := decisionRows(t, f, kept.RunID)
	if len(ds) != 2 || ds[0].Kind != runtime.DecisionEscalate || ds[1].Kind != runtime.DecisionDeny ||
		ds[0].DecidedBy != nil || ds[1].DecidedBy != nil || ds[0].Digest != kept.Digest || ds[1].Digest != first.TurnDigest {
		t.Fatalf("decisions = %+v, want an escalation of the first turn and a denial of the second, both by nobody", ds)
	}
	if !ds[0].Executed || !strings.HasPrefix(ds[0].Reason, "no decision within 2s; escalated") {
		t.Errorf("escalation = %+v, want executed, its reason saying so", ds[0])
	}
	if got := toolResults(t, f, kept.RunID); len(got) != 1 || got[0] != "no decision within 2s" {
		t.Errorf("tool results = %q, want the one denial", got)
	}
	metrics.mu.Lock()
	defer metrics.mu.Unlock()
	if got := strings.Join(metrics.expired, ","); got != "escalate,escalate,deny" {
		t.Errorf("expiries counted = %s, want escalate twice, then deny", got)
	}
}

// Fifty people approve one run while its deadline passes and workers
// sweep: one decision, at most one refund, every loser refused as such.
func TestApproversRacingTheDeadline(t *testing.T) {
	f := newFixture(t, 0, expiringYAML)
	// Two worker processes of two loops each, sweeping every millisecond.
	for range 2 {
		testrig.Work(t, f.NewEngine(runtime.Options{}), 2, time.Millisecond)
	}
	const racers = 50
	won := map[string]int{}
	// The deadline passes around the moment the racers start: a little
	// before in some rounds, a little after in others.
	offsets := []int{-4000, -2000, -1000, 0, 500, 1000, 2000, 4000}
	for round, offset := range offsets {
		paused, order := f.Waiting(t, "expiring")
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var wins int
		codes := map[runtime.Code]int{}
		for range racers {
			wg.Go(func() {
				<-start
				c, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID,
					Digest: paused.Digest, Decision: runtime.DecisionApprove, Actor: f.approver})
				mu.Lock()
				if err != nil {
					codes[runtime.CodeOf(err)]++
				} else {
					wins++
				}
				mu.Unlock()
				if err != nil && runtime.CodeOf(err) == "" {
					t.Errorf("round %d: racer failed: %v", round, err)
				}
				if err == nil {
					if out := c.Run(context.Background(), nil); out.Err != nil {
						t.Errorf("round %d: winner's continuation: %v", round, out.Err)
					}
				}
			})
		}
		if _, err := f.DB.Exec(`UPDATE runs SET decision_deadline = NOW(6) + INTERVAL ? MICROSECOND WHERE id = ?`,
			offset, paused.RunID); err != nil {
			t.Fatal(err)
		}
		close(start)
		wg.Wait()
		f.WaitStatus(t, paused.RunID, runtime.StatusCompleted, 10*time.Second)
		ds := decisionRows(t, f, paused.RunID)
		if len(ds) != 1 {
			t.Fatalf("round %d: decisions = %+v, want exactly one", round, ds)
		}
		refunds := f.Refunds(t, order)
		if refunds > 1 || wins > 1 || (ds[0].Path == runtime.PathExpiry) != (wins == 0) || refunds != wins {
			t.Fatalf("round %d: %d wins, %d refunds, decision %+v: want one winner (a racer with one refund, or the expiry with none)",
				round, wins, refunds, ds[0])
		}
		for code := range codes {
			if code != runtime.CodeAlreadyResuming && code != runtime.CodeNotWaiting {
				t.Errorf("round %d: a loser was refused %q, want already_resuming or not_waiting", round, code)
			}
		}
		won[ds[0].Path]++
	}
	t.Logf("winners over the rounds: %v", won)
}

// TestFollowUpTurnExpires: a later turn's pause has its own deadline, and
// a worker denies it by nobody when it passes, as it does a first turn's.
func TestFollowUpTurnExpires(t *testing.T) {
	f := newFixture(t, 0, expiringYAML)
	paused, _ := f.Waiting(t, "expiring")
	f.Approve(t, paused)
	second := f.followUp(t, paused.RunID, f.owner, "and refund "+f.Order(t))
	if r := f.Run(t, paused.RunID); r.DecisionDeadline == nil || r.ConversationTurn != 2 {
		t.Fatalf("turn 2 waits with deadline %v at turn %d, want one at turn 2", r.DecisionDeadline, r.ConversationTurn)
	}
	work(t, f.engine(0), 1)
	done := f.WaitStatus(t, paused.RunID, runtime.StatusCompleted, 10*time.Second)
	ds := decisionRows(t, f, paused.RunID)
	if len(ds) != 2 || ds[1].Digest != second.Digest || ds[1].Path != runtime.PathExpiry || ds[1].DecidedBy != nil {
		t.Errorf("decisions = %+v, want turn 2's denied by nobody on expiry", ds)
	}
	if done.Answer != "MARKER-NOT-REFUNDED" {
		t.Errorf("turn 2's answer = %q, want the script's answer to a denial", done.Answer)
	}
}
