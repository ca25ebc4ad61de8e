package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

const (
	// votesYAML asks two approvals of every turn, twice: the second turn
	// is a new question, whose votes start again.
	votesYAML = `
identifier: votes
approvals_required: 2
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}", amount_cents: 100}
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}", amount_cents: 200}
      - text: "Two refunds."
tools: [refund_order]
`
	// votesFourEyesYAML asks three approvals of refund_order alone, under
	// four-eyes.
	votesFourEyesYAML = `
identifier: votes-four-eyes
require_second_approver: true
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}"}
      - text: "Done."
tools: [refund_order]
tool_policies:
  refund_order: {approvals_required: 3}
`
)

// vote approves a paused run as one actor and returns what Decide said:
// a *Voted, the continuation of the N-th vote, or a refusal.
func vote(t *testing.T, e *runtime.Engine, paused runtime.Outcome, a runtime.Actor, path string) (*runtime.Continuation, error) {
	t.Helper()
	return e.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: a, Path: path})
}

func wantVoted(t *testing.T, err error, votes, required int) *runtime.Voted {
	t.Helper()
	var v *runtime.Voted
	if !errors.As(err, &v) {
		t.Fatalf("got %v, want a vote recorded", err)
	}
	if len(v.Votes) != votes || v.Required != required {
		t.Fatalf("got %d of %d approvals, want %d of %d", len(v.Votes), v.Required, votes, required)
	}
	return v
}

func TestVotesTwoOfThree(t *testing.T) {
	f := newFixture(t, 0, votesYAML)
	paused, order := f.Waiting(t, "votes")
	if paused.Pending.ApprovalsRequired != 2 {
		t.Fatalf("the turn asks %d approvals, want 2", paused.Pending.ApprovalsRequired)
	}
	_, err := vote(t, f.Engine, paused, f.approver, runtime.PathRequest)
	v := wantVoted(t, err, 1, 2)
	before := f.State(t, paused.RunID)
	if v.Votes[0].User != "approver" {
		t.Errorf("the vote is %q's, want approver's", v.Votes[0].User)
	}
	r := f.Run(t, paused.RunID)
	if r.Status != runtime.StatusWaitingForApproval || r.ApprovalsRequired != 2 || len(r.Votes) != 1 || r.Votes[0].User != "approver" {
		t.Fatalf("after one vote the run is %s, %d approvals required, votes %+v", r.Status, r.ApprovalsRequired, r.Votes)
	}
	if got := f.Count(t, "SELECT COUNT(*) FROM decisions WHERE run_id = ?", paused.RunID); got != 0 {
		t.Fatalf("one vote of two wrote %d decisions", got)
	}

	// A second vote of the same person: already_voted, nothing written.
	_, err = vote(t, f.Engine, paused, f.approver, runtime.PathRequest)
	if got := runtime.CodeOf(err); got != runtime.CodeAlreadyVoted {
		t.Fatalf("a second vote: got %v, want already_voted", err)
	}
	if got := f.Count(t, "SELECT COUNT(*) FROM votes WHERE run_id = ?", paused.RunID); got != 1 {
		t.Fatalf("%d votes after a second vote of one person, want 1", got)
	}
	f.Unchanged(t, paused.RunID, before)

	// The second voter's vote claims the turn and continues it.
	c, err := vote(t, f.Engine, paused, f.refunder, runtime.PathRequest)
	if err != nil || c == nil {
		t.Fatalf("the second vote: %v, want the continuation", err)
	}
	out := c.Run(context.Background(), nil)
	if !out.Status.Waiting() || out.Pending.ApprovalsRequired != 2 {
		t.Fatalf("after the second vote the run is %s, want it waiting on the next turn", out.Status)
	}
	ds := f.Decisions(t, paused.RunID)
	if len(ds) != 1 || ds[0].Kind != runtime.DecisionApprove {
		t.Fatalf("decisions %+v, want one approval", ds)
	}
	if got := f.Count(t, "SELECT COUNT(*) FROM decisions d JOIN users u ON u.id = d.decided_by WHERE d.run_id = ? AND u.name = 'refunder'", paused.RunID); got != 1 {
		t.Errorf("the decision is not the N-th voter's")
	}
	if got := f.Refunds(t, order); got != 1 {
		t.Errorf("%d refunds after the first turn, want 1", got)
	}

	// A new turn voids the votes: none count, and the rows stay.
	r = f.Run(t, paused.RunID)
	if len(r.Votes) != 0 || r.ApprovalsRequired != 2 {
		t.Fatalf("the new turn shows votes %+v (%d required), want none of 2", r.Votes, r.ApprovalsRequired)
	}
	if got := f.Count(t, "SELECT COUNT(*) FROM votes WHERE run_id = ?", paused.RunID); got != 2 {
		t.Errorf("%d vote rows kept, want the first turn's 2", got)
	}
	// A vote for the old turn's digest is stale.
	_, err = vote(t, f.Engine, paused, f.admin, runtime.PathRequest)
	if got := runtime.CodeOf(err); got != runtime.CodeStaleTurn {
		t.Fatalf("a vote on the old turn: got %v, want stale_turn", err)
	}
	_, err = vote(t, f.Engine, out, f.approver, runtime.PathRequest)
	wantVoted(t, err, 1, 2) // approver votes again: on a new turn
}

func TestVotesDenyEndsIt(t *testing.T) {
	f := newFixture(t, 0, votesYAML)
	paused, order := f.Waiting(t, "votes")
	if _, err := vote(t, f.Engine, paused, f.approver, runtime.PathRequest); !errors.As(err, new(*runtime.Voted)) {
		t.Fatalf("first vote: %v", err)
	}
	out := f.Decide(t, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest, Decision: runtime.DecisionDeny,
		Reason: "no", Actor: f.refunder})
	if out.Status == runtime.StatusWaitingForApproval && out.Digest == paused.Digest {
		t.Fatalf("the denial left the turn waiting")
	}
	ds := f.Decisions(t, paused.RunID)
	if len(ds) < 1 || ds[0].Kind != runtime.DecisionDeny {
		t.Fatalf("decisions %+v, want the denial first", ds)
	}
	if got := f.Refunds(t, order); got != 0 {
		t.Errorf("%d refunds after a denial", got)
	}
	if got := f.Count(t, "SELECT COUNT(*) FROM runs WHERE id = ? AND approvals_required IS NOT NULL AND turn_digest = ?", paused.RunID, paused.Digest); got != 0 {
		t.Errorf("the denial's claim left approvals_required on the turn")
	}
}

func TestVotesFourEyes(t *testing.T) {
	f := newFixture(t, 0, votesFourEyesYAML)
	paused, _ := f.Waiting(t, "votes-four-eyes")
	if paused.Pending.ApprovalsRequired != 3 {
		t.Fatalf("the turn asks %d approvals, want 3 (the tool's policy)", paused.Pending.ApprovalsRequired)
	}
	_, err := vote(t, f.Engine, paused, f.owner, runtime.PathRequest)
	if got := runtime.CodeOf(err); got != runtime.CodeFourEyes {
		t.Fatalf("the owner's vote: got %v, want four_eyes", err)
	}
	if got := f.Count(t, "SELECT COUNT(*) FROM votes WHERE run_id = ?", paused.RunID); got != 0 {
		t.Fatalf("the owner's refused vote wrote %d votes", got)
	}
	_, err = vote(t, f.Engine, paused, f.approver, runtime.PathDurable)
	wantVoted(t, err, 1, 3)
	_, err = vote(t, f.Engine, paused, f.refunder, runtime.PathDurable)
	wantVoted(t, err, 2, 3)
	c, err := vote(t, f.Engine, paused, f.admin, runtime.PathDurable)
	if err != nil || c != nil {
		t.Fatalf("the third vote on the durable path: %v, %v; want it claimed for a worker", c, err)
	}
	if r := f.Run(t, paused.RunID); r.Status != runtime.StatusDecided {
		t.Fatalf("after three votes the run is %s, want decided", r.Status)
	}
}

// An approval of a voted turn edits nothing and stands for nothing
// beyond the turn.
func TestVotesRefuseEditsAndStanding(t *testing.T) {
	f := newFixture(t, 0, votesYAML)
	paused, _ := f.Waiting(t, "votes")
	before := f.State(t, paused.RunID)
	_, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Scope: runtime.ScopeSession, Actor: f.approver})
	if got := runtime.CodeOf(err); got != runtime.CodeInvalidRequest {
		t.Errorf("scope=session on a voted turn: got %v, want invalid_request", err)
	}
	f.Unchanged(t, paused.RunID, before)
}

// A storm: 30 voters on each of 10 runs that need 3 approvals, all at
// once, some twice. Each run is claimed once, by 3 distinct votes, and no
// vote is counted twice.
func TestVotesStorm(t *testing.T) {
	const runs, voters, need = 10, 30, 3
	// votesYAML asking 3: only its first turn is decided here.
	opts := []testrig.Option{testrig.Configs(strings.Replace(votesYAML, "approvals_required: 2", fmt.Sprintf("approvals_required: %d", need), 1))}
	for i := range voters {
		opts = append(opts, testrig.User(fmt.Sprintf("voter%d", i), runtime.RoleUser, runtime.GrantApprove))
	}
	w := testrig.New(t, opts...)
	paused := make([]runtime.Outcome, runs)
	for i := range paused {
		paused[i], _ = w.Waiting(t, "votes")
	}
	var mu sync.Mutex
	recorded, claimed := map[int64]int{}, map[int64]int{}
	var wg sync.WaitGroup
	for _, p := range paused {
		for v := range voters {
			a := w.Actor(fmt.Sprintf("voter%d", v))
			for range 1 + v%2 { // every other voter votes twice at once
				wg.Go(func() {
					c, err := w.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: p.RunID, Digest: p.Digest,
						Decision: runtime.DecisionApprove, Actor: a, Path: runtime.PathDurable})
					mu.Lock()
					defer mu.Unlock()
					switch code := runtime.CodeOf(err); {
					case err == nil && c == nil:
						claimed[p.RunID]++
					case errors.As(err, new(*runtime.Voted)):
						recorded[p.RunID]++
					case code == runtime.CodeAlreadyResuming || code == runtime.CodeAlreadyVoted || code == runtime.CodeStaleTurn:
					default:
						t.Errorf("run %d, %s: %v", p.RunID, a.Name, err)
					}
				})
			}
		}
	}
	wg.Wait()
	for _, p := range paused {
		if claimed[p.RunID] != 1 || recorded[p.RunID] != need-1 {
			t.Errorf("run %d: %d claims and %d votes recorded, want 1 and %d", p.RunID, claimed[p.RunID], recorded[p.RunID], need-1)
		}
		if got := w.Count(t, "SELECT COUNT(*) FROM decisions WHERE run_id = ?", p.RunID); got != 1 {
			t.Errorf("run %d has %d decisions, want 1", p.RunID, got)
		}
		if got := w.Count(t, "SELECT COUNT(DISTINCT user_id) FROM votes WHERE run_id = ? AND turn_digest = ?", p.RunID, p.Digest); got != need {
			t.Errorf("run %d counted %d distinct voters, want %d", p.RunID, got, need)
		}
		if got := w.Count(t, "SELECT COUNT(*) FROM votes WHERE run_id = ?", p.RunID); got != need {
			t.Errorf("run %d has %d votes, want %d", p.RunID, got, need)
		}
		if got := w.Count(t, `SELECT COUNT(*) FROM decisions d JOIN votes v ON v.run_id = d.run_id AND v.turn_digest = d.turn_digest
			AND v.user_id = d.decided_by WHERE d.run_id = ?`, p.RunID); got != 1 {
			t.Errorf("run %d: the decision is not one of its voters'", p.RunID)
		}
		// Each vote that claimed nothing told the feed, once.
		if got := w.Count(t, "SELECT COUNT(*) FROM run_changes WHERE run_id = ? AND change_kind = ?", p.RunID, runtime.ChangeVoted); got != need-1 {
			t.Errorf("run %d: %d voted changes in the feed, want %d", p.RunID, got, need-1)
		}
	}
}

// A process of the version before votes claims with the UPDATE it always
// ran, which leaves approvals_required set: the CHECK of migration 00038
// refuses it, and the turn still waits for its votes.
func TestVotesOlderProcessCannotClaimWithOneApproval(t *testing.T) {
	f := newFixture(t, 0, votesYAML)
	paused, _ := f.Waiting(t, "votes")
	_, err := f.DB.Exec(`UPDATE runs SET status = 'decided', claimed_by = NULL, decided_at = NOW(6), waiting_since = NULL,
		decision_deadline = NULL, updated_at = NOW(6) WHERE id = ? AND status = 'waiting_for_approval' AND turn_digest = ?`,
		paused.RunID, paused.Digest)
	if err == nil {
		t.Fatalf("an older process's claim of a turn that needs 2 approvals went through")
	}
	if r := f.Run(t, paused.RunID); r.Status != runtime.StatusWaitingForApproval {
		t.Fatalf("the run is %s, want it still waiting", r.Status)
	}
	// A turn without votes is claimed by that UPDATE as before.
	plain := newFixture(t, 0, refundYAML)
	p, _ := plain.Waiting(t, "refund")
	if _, err := plain.DB.Exec(`UPDATE runs SET status = 'decided' WHERE id = ? AND turn_digest = ?`, p.RunID, p.Digest); err != nil {
		t.Fatalf("an older process's claim of a turn without votes: %v", err)
	}
}

// A vote that does not complete the count writes its run.voted in its own
// transaction: who voted, and how many of how many approvals.
func TestVotesNotify(t *testing.T) {
	f := newFixture(t, 0, votesYAML)
	f.SetNotify(t, "votes", []runtime.Notify{{URL: "https://hooks.example.com/v", Events: []string{runtime.EventRunVoted}}})
	paused, _ := f.Waiting(t, "votes")
	if _, err := vote(t, f.Engine, paused, f.approver, runtime.PathDurable); !errors.As(err, new(*runtime.Voted)) {
		t.Fatalf("vote: %v", err)
	}
	rows := f.Outbox(t, paused.RunID)
	if len(rows) != 1 || rows[0].Event != runtime.EventRunVoted {
		t.Fatalf("outbox %+v, want one run.voted", rows)
	}
	var body struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(rows[0].Body, &body); err != nil {
		t.Fatal(err)
	}
	if d := body.Data; d["voter"] != "approver" || d["votes"] != float64(1) || d["approvals_required"] != float64(2) {
		t.Errorf("run.voted data %v", d)
	}
	// The second vote is the decision: no run.voted.
	if _, err := vote(t, f.Engine, paused, f.refunder, runtime.PathDurable); err != nil {
		t.Fatalf("the second vote: %v", err)
	}
	if rows := f.Outbox(t, paused.RunID); len(rows) != 1 {
		t.Errorf("%d notifications after the deciding vote, want still 1", len(rows))
	}
}

// A turn of two calls that needs two approvals, decided call by call: a
// vote approves every call as offered, so a mixed choice is refused with
// nothing written; every call approved is a vote like any approval, and
// every call denied ends the turn at once.
func TestVotesOnATurnDecidedCallByCall(t *testing.T) {
	w := newRuledWorld(t, 0, `
identifier: voted-calls
approvals_required: 2
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - {name: write_note, arguments: {amount: 1}}
          - {name: write_note, arguments: {amount: 2}}
      - text: "Done."
tools: [write_note]
`)
	choose := func(first, second string) map[string]runtime.CallDecision {
		return map[string]runtime.CallDecision{"call_1_1": {Decision: first}, "call_1_2": {Decision: second}}
	}
	out, _ := w.Start(t, testrig.Launch{Configuration: "voted-calls"})
	if out.Pending == nil || len(out.Pending.Calls) != 2 || out.Pending.ApprovalsRequired != 2 {
		t.Fatalf("outcome %s %+v, want two calls waiting for two approvals", out.Status, out.Pending)
	}
	ctx := context.Background()
	req := runtime.DecideRequest{RunID: out.RunID, Digest: out.Digest, Actor: w.Actor("approver"),
		Calls: choose(runtime.DecisionApprove, runtime.DecisionDeny)}
	before := w.State(t, out.RunID)
	if _, err := w.Engine.Decide(ctx, req); runtime.CodeOf(err) != runtime.CodeInvalidRequest {
		t.Fatalf("a mixed choice on a voted turn: %v, want invalid_request", err)
	}
	w.Unchanged(t, out.RunID, before)
	if n := w.Count(t, "SELECT COUNT(*) FROM votes WHERE run_id = ?", out.RunID); n != 0 {
		t.Fatalf("a refused mixed choice left %d votes", n)
	}

	req.Calls = choose(runtime.DecisionApprove, runtime.DecisionApprove)
	_, err := w.Engine.Decide(ctx, req)
	wantVoted(t, err, 1, 2)

	req.Actor, req.Calls = w.Actor("admin"), choose(runtime.DecisionDeny, runtime.DecisionDeny)
	c, err := w.Engine.Decide(ctx, req)
	if err != nil || c == nil {
		t.Fatalf("every call denied on a voted turn: %v, want the denial claimed", err)
	}
	if got := c.Run(ctx, nil); got.Status != runtime.StatusCompleted {
		t.Fatalf("after the denial the run is %s, want completed", got.Status)
	}
	if n := w.toolCalls(out.RunID); n != 0 {
		t.Errorf("%d calls ran after every call was denied, want none", n)
	}
	if ds := w.Decisions(t, out.RunID); len(ds) != 1 || ds[0].Kind != runtime.DecisionDeny {
		t.Errorf("decisions %+v, want one denial", ds)
	}
}
