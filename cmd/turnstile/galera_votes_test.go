package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// voteAnswer is what one approval of a voted turn was answered.
type voteAnswer struct {
	run    int64
	status int
	kind   string // "voted", "claimed", or the refusal's code
	err    error
}

// vote posts an approval and says what became of it.
func (a *apiClient) vote(id int64, digest string) voteAnswer {
	resp, err := a.do(http.MethodPost, fmt.Sprintf("/api/runs/%d/decisions", id),
		map[string]string{"turn_digest": digest, "decision": "approve"}, "")
	if err != nil {
		return voteAnswer{run: id, err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	var body struct {
		Status string `json:"status"`
		Error  struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err == nil {
		err = json.Unmarshal(raw, &body)
	}
	a2 := voteAnswer{run: id, status: resp.StatusCode, err: err}
	switch {
	case resp.StatusCode == http.StatusOK && body.Status == "voted":
		a2.kind = "voted"
	case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusAccepted:
		a2.kind = "claimed"
	default:
		a2.kind = body.Error.Code
	}
	return a2
}

// 6. The vote storm across two instances on two nodes: 10 runs that need
// 3 approvals, 30 voters on each, alternating between the instances, all
// let go at once. On each run exactly 3 distinct votes count: 2 answered
// "voted", 1 claims the turn; the run continues once and refunds once;
// every other voter is told already_resuming, stale_turn or
// already_voted. Votes on two nodes conflict at certification (both write
// the run's row), so neither counts without the other.
func TestGaleraVoteStorm(t *testing.T) {
	c := cluster(t)
	const runs, voters, need = 10, 30, 3
	r, dsns := clusterRig(t, c, pacedYAML("votes", 0, 10*time.Millisecond, 0)+fmt.Sprintf("approvals_required: %d\n", need))
	waiting := make([]waitingRun, runs)
	for i := range waiting {
		waiting[i] = r.waiting(t, "votes")
	}
	unlimited := []string{lease, "--max-user-requests", "0"}
	servers := []*server{startServe(t, dsns[0], unlimited...), startServe(t, dsns[1], unlimited...)}
	clients := make([]*apiClient, voters)
	for i := range clients {
		u := runtime.User{Name: fmt.Sprintf("voter%d", i), Role: runtime.RoleUser, Grants: []string{runtime.GrantApprove}}
		if err := r.Store.CreateUser(context.Background(), &u); err != nil {
			t.Fatal(err)
		}
		clients[i] = newAPIClient(t, r, servers[i%2], u.Actor(), runtime.ScopeRunDecide)
	}

	answers := make(chan voteAnswer, runs*voters)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range waiting {
		for _, cl := range clients {
			wg.Go(func() {
				<-start
				answers <- cl.vote(w.id, w.digest)
			})
		}
	}
	released := time.Now()
	close(start)
	wg.Wait()
	close(answers)
	t.Logf("%d votes answered %s after they were let go", runs*voters, time.Since(released).Round(time.Millisecond))

	voted, claimed := map[int64]int{}, map[int64]int{}
	told := map[string]int{}
	for a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("run %d: %d %v", a.run, a.status, a.err)
		case a.kind == "voted":
			voted[a.run]++
		case a.kind == "claimed":
			claimed[a.run]++
		case a.status == http.StatusConflict && (a.kind == string(runtime.CodeAlreadyResuming) ||
			a.kind == string(runtime.CodeStaleTurn) || a.kind == string(runtime.CodeAlreadyVoted)):
			told[a.kind]++
		default:
			t.Errorf("run %d: answered %d %q", a.run, a.status, a.kind)
		}
	}
	t.Logf("the other voters told: %v", told)
	other := onNode(t, dsns[1])
	for _, w := range waiting {
		if voted[w.id] != need-1 || claimed[w.id] != 1 {
			t.Errorf("run %d: %d answered voted and %d claimed, want %d and 1", w.id, voted[w.id], claimed[w.id], need-1)
		}
		r.WaitStatus(t, w.id, runtime.StatusCompleted, 30*time.Second)
		checkExactlyOnce(t, r, w, 1)
		var distinct, rows, decisions int
		if err := other.Get(&distinct, `SELECT COUNT(DISTINCT user_id) FROM votes WHERE run_id = ? AND turn_digest = ?`, w.id, w.digest); err != nil {
			t.Fatal(err)
		}
		if err := other.Get(&rows, `SELECT COUNT(*) FROM votes WHERE run_id = ?`, w.id); err != nil {
			t.Fatal(err)
		}
		if err := other.Get(&decisions, `SELECT COUNT(*) FROM decisions d JOIN votes v ON v.run_id = d.run_id
			AND v.turn_digest = d.turn_digest AND v.user_id = d.decided_by WHERE d.run_id = ?`, w.id); err != nil {
			t.Fatal(err)
		}
		if distinct != need || rows != need || decisions != 1 {
			t.Errorf("run %d seen from node 1: %d distinct voters in %d votes, %d decisions by a voter; want %d, %d, 1",
				w.id, distinct, rows, decisions, need, need)
		}
	}
	for _, s := range servers {
		if strings.Contains(s.stderr.String(), `"level":"ERROR"`) {
			t.Errorf("server logged an error:\n%s", s.stderr)
		}
	}
}
