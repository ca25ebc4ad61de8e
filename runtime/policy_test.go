package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// ruledYAML pauses on five calls at once; its three rules approve two of
// them (one turn), deny one, ask two votes for one, and leave one to a
// person as it is.
const ruledYAML = `
identifier: ruled
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - {name: write_note, arguments: {amount: 10, owner: owner}}
          - {name: write_note, arguments: {amount: 900, owner: owner}}
          - {name: delete_note, arguments: {id: 1}}
          - {name: write_note, arguments: {amount: 100, owner: owner}}
          - {name: write_note, arguments: {amount: 15, owner: owner}}
      - text: "Done."
tools: [write_note, delete_note]
policy:
  - name: small-own
    when: tool == "write_note" && args.amount < 20 && args.owner == owner.name && owner.role == "user"
    then: approve
    reason: small notes of the owner's own
  - name: big
    when: tool == "write_note" && args.amount > 500
    then: {votes: 2}
  - name: no-deletes
    when: tool.startsWith("delete_")
    then: deny
    reason: deletes are not done by agents
`

// The calls ruledYAML's first round makes, by what the rules do with them.
var (
	ruleApproved = []string{"call_1_1", "call_1_5"}
	ruleDenied   = "call_1_3"
	ruleVoted    = "call_1_2"
	ruleLeft     = []string{"call_1_2", "call_1_4"}
)

// note is a write tool that needs an approval and counts its calls.
type note struct {
	name  string
	mu    *sync.Mutex
	calls map[int64]int // by run
}

func (n note) Spec() runtime.ToolSpec {
	return runtime.ToolSpec{Name: n.name, Description: "writes a note", Effect: runtime.IdempotentWrite,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (n note) Call(_ context.Context, in runtime.Invocation) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls[in.RunID]++
	return "written", nil
}

type ruledWorld struct {
	*testrig.World
	calls map[int64]int
	mu    *sync.Mutex
	logs  *logBuffer
}

func newRuledWorld(t testing.TB, lease time.Duration, yamls ...string) *ruledWorld {
	t.Helper()
	mu, calls, logs := &sync.Mutex{}, map[int64]int{}, &logBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	w := testrig.New(t, testrig.Configs(yamls...), testrig.Prompt("Write notes"),
		testrig.Tools(note{"write_note", mu, calls}, note{"delete_note", mu, calls}),
		testrig.Engine(runtime.Options{Lease: lease, Logger: log}))
	return &ruledWorld{World: w, calls: calls, mu: mu, logs: logs}
}

func (w *ruledWorld) toolCalls(id int64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[id]
}

// checkPause: the person is asked about the calls no rule decided, with
// the votes the rule asks for, and which rule asked.
func checkPause(t *testing.T, out runtime.Outcome) {
	t.Helper()
	if out.Status != runtime.StatusWaitingForApproval || out.Pending == nil {
		t.Fatalf("run %d is %s, want it waiting for a person", out.RunID, out.Status)
	}
	var ids []string
	for _, c := range out.Pending.Calls {
		ids = append(ids, c.ID)
	}
	if strings.Join(ids, ",") != strings.Join(ruleLeft, ",") {
		t.Errorf("run %d: a person is asked about %v, want %v", out.RunID, ids, ruleLeft)
	}
	if out.Pending.ApprovalsRequired != 2 || out.Pending.Rules[ruleVoted] != "big" || len(out.Pending.Rules) != 1 {
		t.Errorf("run %d: approvals_required %d, rules %v; want 2 asked by big for %s", out.RunID,
			out.Pending.ApprovalsRequired, out.Pending.Rules, ruleVoted)
	}
}

// ruleDecisionRow is a decisions row as the test reads it.
type ruleDecisionRow struct {
	Digest    string  `db:"turn_digest"`
	Kind      string  `db:"kind"`
	DecidedBy *int64  `db:"decided_by"`
	Policy    *string `db:"policy"`
	Reason    string  `db:"reason"`
	Executed  bool    `db:"executed"`
}

// checkRuled: a settled run of ruledYAML shows the rules' decisions as
// real decisions, each once, and the person's, and a person was asked
// once, about what no rule decided.
func (w *ruledWorld) checkRuled(t *testing.T, id int64) {
	t.Helper()
	r := w.Run(t, id)
	if r.Status != runtime.StatusCompleted {
		t.Fatalf("run %d is %s (%s), want completed", id, r.Status, r.TerminationReason)
	}
	var rows []ruleDecisionRow
	if err := w.DB.Select(&rows, `SELECT turn_digest, kind, decided_by, policy, reason, executed_at IS NOT NULL AS executed
		FROM decisions WHERE run_id = ? ORDER BY id`, id); err != nil {
		t.Fatal(err)
	}
	byPolicy := map[string]ruleDecisionRow{}
	people := 0
	for _, d := range rows {
		switch {
		case d.Policy != nil && d.DecidedBy == nil:
			if _, twice := byPolicy[*d.Policy]; twice {
				t.Errorf("run %d: rule %s decided twice", id, *d.Policy)
			}
			byPolicy[*d.Policy] = d
		case d.Policy == nil && d.DecidedBy != nil:
			people++
		default:
			t.Errorf("run %d: decision %+v is neither a rule's nor a person's", id, d)
		}
	}
	if a := byPolicy["small-own"]; a.Kind != runtime.DecisionApprove || a.Reason != "small notes of the owner's own" || !a.Executed {
		t.Errorf("run %d: small-own's decision = %+v, want an executed approval with its reason", id, a)
	}
	if d := byPolicy["no-deletes"]; d.Kind != runtime.DecisionDeny || !d.Executed {
		t.Errorf("run %d: no-deletes' decision = %+v, want an executed denial", id, d)
	}
	if len(byPolicy) != 2 || people != 1 {
		t.Errorf("run %d: %d rules' and %d people's decisions, want 2 and 1: %+v", id, len(byPolicy), people, rows)
	}
	// The rule's decision reads back as policy:<name>, like a person's.
	got, err := w.Store.Decision(context.Background(), id, byPolicy["small-own"].Digest)
	if err != nil || got.DeciderName != "policy:small-own" || got.DecidedBy != 0 || got.Policy != "small-own" {
		t.Errorf("run %d: Decision = %+v, %v; want decider policy:small-own", id, got, err)
	}
	var approvals []string
	suspends := 0
	for _, e := range w.Events(t, id) {
		switch e.Kind {
		case runtime.KindApproval:
			var p runtime.ApprovalPayload
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			approvals = append(approvals, p.By+" "+p.Decision)
		case runtime.KindSuspend:
			suspends++
		}
	}
	want := "policy:small-own approve,policy:no-deletes deny,admin approve"
	if strings.Join(approvals, ",") != want {
		t.Errorf("run %d: approval events %v, want %s", id, approvals, want)
	}
	if suspends != 1 {
		t.Errorf("run %d: %d suspensions, want one: for the person", id, suspends)
	}
	var waiting int
	if err := w.DB.Get(&waiting, `SELECT COUNT(*) FROM run_changes WHERE run_id = ? AND change_kind = ?`, id, runtime.ChangeWaiting); err != nil {
		t.Fatal(err)
	}
	if waiting != 1 {
		t.Errorf("run %d: %d waiting changes in the feed, want one", id, waiting)
	}
	// Four calls ran: the rule's two approved ones and the person's two;
	// the denied one never ran, and the model read why.
	if n := w.toolCalls(id); n != 4 {
		t.Errorf("run %d: %d tool calls ran, want 4", id, n)
	}
	var bodies [][]byte
	if err := w.DB.Select(&bodies, `SELECT body FROM run_messages WHERE run_id = ? ORDER BY idx`, id); err != nil {
		t.Fatal(err)
	}
	denied := ""
	for _, b := range bodies {
		var m runtime.Message
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m.ToolCallID == ruleDenied {
			denied = m.Content
		}
	}
	if denied != "denied by policy:no-deletes: deletes are not done by agents" {
		t.Errorf("run %d: the denied call's result is %q", id, denied)
	}
}

func TestRulesDecideBeforeAPersonIsAsked(t *testing.T) {
	w := newRuledWorld(t, 0, ruledYAML)
	out, _ := w.Start(t, testrig.Launch{Configuration: "ruled"})
	checkPause(t, out)
	if n := w.toolCalls(out.RunID); n != 0 {
		t.Fatalf("%d tools ran before the person decided, want none", n)
	}
	w.approveTwice(t, out, runtime.PathRequest)
	w.checkRuled(t, out.RunID)
}

// approveTwice decides the person's turn of ruledYAML, which a rule asks
// two approvals of: the approver's is a vote, the admin's claims the turn
// (and is the decision), and its continuation runs here.
func (w *ruledWorld) approveTwice(t testing.TB, out runtime.Outcome, path string) {
	t.Helper()
	req := runtime.DecideRequest{RunID: out.RunID, Digest: out.Digest, Decision: runtime.DecisionApprove,
		Actor: w.Actor("approver"), Path: path}
	var voted *runtime.Voted
	if _, err := w.Engine.Decide(context.Background(), req); !errors.As(err, &voted) || len(voted.Votes) != 1 || voted.Required != 2 {
		t.Errorf("run %d: the first approval of a turn a rule asks two of: %v, want a vote, 1 of 2", out.RunID, err)
		return
	}
	req.Actor = w.Actor("admin")
	c, err := w.Engine.Decide(context.Background(), req)
	if err != nil {
		t.Errorf("run %d: the second approval: %v", out.RunID, err)
		return
	}
	if c != nil {
		c.Run(context.Background(), nil)
	}
}

// A rule whose evaluation fails (a key the arguments lack) leaves the
// call to a person and says why in the log; later rules are not asked,
// and the run goes on.
func TestRuleThatFailsLeavesTheCallToAPerson(t *testing.T) {
	w := newRuledWorld(t, 0, `
identifier: failing
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - {name: write_note, arguments: {amount: 5}}
          - {name: write_note, arguments: {size: 5}}
      - text: "Done."
tools: [write_note]
policy:
  - name: small
    when: args.amount < 20
    then: approve
  - name: anything
    when: "true"
    then: approve
`)
	out, _ := w.Start(t, testrig.Launch{Configuration: "failing"})
	if out.Status != runtime.StatusWaitingForApproval || len(out.Pending.Calls) != 1 || out.Pending.Calls[0].ID != "call_1_2" {
		t.Fatalf("outcome %s %+v, want call_1_2 left to a person", out.Status, out.Pending)
	}
	logs := w.logs.String()
	if !strings.Contains(logs, "policy rule failed") || !strings.Contains(logs, "rule=small") || !strings.Contains(logs, "no such key") {
		t.Errorf("the log does not say why the rule failed:\n%s", logs)
	}
	w.Approve(t, out)
	if r := w.Run(t, out.RunID); r.Status != runtime.StatusCompleted {
		t.Errorf("run is %s, want completed", r.Status)
	}
}

// TestRulesStormDecideEachTurnOnce: 100 runs at once, a third started in
// requests, a third queued for the workers of two processes, a third
// claimed by holders that die before their first step and are recovered
// (and wake up afterwards, too late). Every run's calls are matched as the
// rules say, nobody is asked about what a rule decided, and every rule
// turn has exactly one decision, recorded on the path that ran it.
func TestRulesStormDecideEachTurnOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("a storm of 100 runs")
	}
	w := newRuledWorld(t, 0, ruledYAML)
	ctx := context.Background()
	const n = 100
	owner := w.Actor("owner")
	start := runtime.StartRequest{Configuration: "ruled", Prompt: "Write notes", Owner: owner}
	ids := make([]int64, n)
	path := map[int64]string{}
	var stale []*runtime.Continuation
	var wg sync.WaitGroup
	for i := range n {
		switch i % 3 {
		case 0:
			id, err := w.Engine.Enqueue(ctx, start)
			if err != nil {
				t.Fatal(err)
			}
			ids[i], path[id] = id, runtime.PathDurable
		case 1:
			c, err := w.Engine.Start(ctx, start)
			if err != nil {
				t.Fatal(err)
			}
			ids[i], path[c.RunID()] = c.RunID(), runtime.PathRequest
			wg.Go(func() { c.Run(ctx, nil) })
		case 2:
			// Claimed, and its holder dies: a worker takes it over once
			// its lease has run out.
			c, err := w.Engine.Start(ctx, start)
			if err != nil {
				t.Fatal(err)
			}
			ids[i], path[c.RunID()] = c.RunID(), runtime.PathDurable
			stale = append(stale, c)
			if _, err := w.DB.Exec(`UPDATE runs SET lease_expires_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, c.RunID()); err != nil {
				t.Fatal(err)
			}
		}
	}
	work(t, w.NewEngine(runtime.Options{}), 3)
	work(t, w.NewEngine(runtime.Options{}), 3)
	wg.Wait()
	digests := map[int64]string{}
	for _, id := range ids {
		r := w.WaitStatus(t, id, runtime.StatusWaitingForApproval, 60*time.Second)
		digests[id] = r.TurnDigest
		turn, err := w.Engine.Turn(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		checkPause(t, runtime.Outcome{RunID: id, Status: r.Status, Pending: turn})
	}
	// The dead holders wake up: each stops at its first commit, having
	// written nothing.
	for _, c := range stale {
		if out := c.Run(ctx, nil); out.Err == nil {
			t.Errorf("run %d: a holder whose lease a worker took over went on: %s", out.RunID, out.Status)
		}
	}
	// People decide, two for each run (a rule asks two approvals), half in
	// requests and half on the durable path.
	for i, id := range ids {
		path := runtime.PathRequest
		if i%2 == 0 {
			path = runtime.PathDurable
		}
		wg.Go(func() { w.approveTwice(t, runtime.Outcome{RunID: id, Digest: digests[id]}, path) })
	}
	wg.Wait()
	for _, id := range ids {
		w.WaitStatus(t, id, runtime.StatusCompleted, 60*time.Second)
		w.checkRuled(t, id)
		var paths []string
		if err := w.DB.Select(&paths, `SELECT DISTINCT path FROM decisions WHERE run_id = ? AND policy IS NOT NULL`, id); err != nil {
			t.Fatal(err)
		}
		if len(paths) != 1 || paths[0] != path[id] {
			t.Errorf("run %d: the rules' decisions were made on %v, want %s", id, paths, path[id])
		}
	}
	if got := w.Count(t, `SELECT COUNT(*) FROM decisions WHERE policy IS NOT NULL AND decided_by IS NULL`); got != 2*n {
		t.Errorf("%d rule decisions, want %d", got, 2*n)
	}
}
