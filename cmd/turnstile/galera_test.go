package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/clustertest"
	"github.com/turnstile-dev/turnstile/store/dbtest"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// Turnstile on a 3-node Galera cluster: instances on
// different nodes race, share work, lose a node, and follow each other's
// runs. The cluster starts once for this test binary (with the first test
// that needs it; about a minute) and stops in TestMain.

// galera is this binary's cluster.
var galera struct {
	once sync.Once
	c    *clustertest.Cluster
	err  error
}

// stopGalera stops the cluster if a test started it.
func stopGalera() {
	if galera.c != nil {
		galera.c.Stop()
	}
}

// cluster returns the running cluster, started on first use. Outside CI a
// machine without galera-4 skips the test with what to install; in CI
// (CI=true) that is a failure, since .ci/run installs it.
func cluster(t *testing.T) *clustertest.Cluster {
	t.Helper()
	if missing := clustertest.Missing(); missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Galera cluster tests need %s", missing)
		}
		t.Skipf("the Galera cluster tests need %s", missing)
	}
	galera.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		galera.c, galera.err = clustertest.Start(ctx, 3)
		if galera.err == nil {
			fmt.Fprintf(os.Stderr, "galera: 3 nodes synced in %s\n", time.Since(start).Round(time.Second))
		}
	})
	if galera.err != nil {
		t.Fatal(galera.err)
	}
	// A test that killed a node brought it back before it ended; this
	// waits for every node to be synced again all the same.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := galera.c.WaitSynced(ctx, galera.c.Size()); err != nil {
		t.Fatal(err)
	}
	return galera.c
}

// clusterRig is a rig on a database of its own on the cluster, made and
// migrated through node 0 and dropped when the test ends (store/dbtest);
// dsns are its DSNs on every node.
func clusterRig(t *testing.T, c *clustertest.Cluster, yamls ...string) (*rig, []string) {
	t.Helper()
	db, dsn := dbtest.NewOn(t, c.DSN(0, ""))
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dsns := make([]string, c.Size())
	for i := range dsns {
		dsns[i] = c.DSN(i, cfg.DBName)
	}
	return newRigOn(t, db, dsns[0], yamls...), dsns
}

// onNode opens a pool on the rig's database through another node, to see
// what that node sees.
func onNode(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// apiClient calls the JSON API of one instance with a bearer token.
type apiClient struct {
	base, token string
	client      *http.Client
}

func newAPIClient(t *testing.T, r *rig, s *server, user runtime.Actor, scopes ...string) *apiClient {
	t.Helper()
	token, _, err := r.Store.CreateToken(context.Background(), user.ID, scopes, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &apiClient{base: "http://" + s.addr, token: token, client: &http.Client{}}
}

// do sends a request with the token and a JSON body (none when nil).
func (a *apiClient) do(method, path string, body any, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, a.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return a.client.Do(req)
}

// approve posts an approval of a run's turn and returns the status and
// the refusal's code, if any.
func (a *apiClient) approve(id int64, digest string) (int, runtime.Code, error) {
	resp, err := a.do(http.MethodPost, fmt.Sprintf("/api/runs/%d/decisions", id),
		map[string]string{"turn_digest": digest, "decision": "approve"}, "")
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var body struct {
		Error struct {
			Code runtime.Code `json:"code"`
		} `json:"error"`
	}
	raw, err := io.ReadAll(resp.Body)
	if err == nil && len(raw) > 0 {
		err = json.Unmarshal(raw, &body)
	}
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("%d %s: %w", resp.StatusCode, raw, err)
	}
	return resp.StatusCode, body.Error.Code, nil
}

// stream opens a streamed request and reads its lines.
func (a *apiClient) stream(t *testing.T, method, path string, body any) *testrig.Stream {
	t.Helper()
	start := time.Now()
	resp, err := a.do(method, path, body, "application/x-ndjson")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s %s = %d, want a 200 stream:\n%s", method, path, resp.StatusCode, raw)
	}
	return testrig.Read(t, resp.Body, start)
}

// 1. The duplicate-decision storm across two instances on two nodes: 20
// waiting runs, 20 racers for each, alternating between the instances,
// all let go at once. Each run continues once and refunds once, as both
// nodes see it; every loser is told already_resuming or stale_turn; no
// answer is a 5xx. (On a single server a lost race is a lock wait; across
// nodes it is a lost certification at COMMIT, error 1213.)
func TestGaleraDuplicateDecisionStorm(t *testing.T) {
	c := cluster(t)
	r, dsns := clusterRig(t, c, pacedYAML("storm", 0, 10*time.Millisecond, 0))
	const runs, racers = 20, 20
	waiting := make([]waitingRun, runs)
	for i := range waiting {
		waiting[i] = r.waiting(t, "storm")
	}
	// The 400 racers are one operator's: without a per-user limit, which
	// would refuse all but 32 of each instance's before they race.
	unlimited := []string{lease, "--max-user-requests", "0"}
	servers := []*server{startServe(t, dsns[0], unlimited...), startServe(t, dsns[1], unlimited...)}
	clients := []*apiClient{
		newAPIClient(t, r, servers[0], r.operator, runtime.ScopeRunDecide),
		newAPIClient(t, r, servers[1], r.operator, runtime.ScopeRunDecide),
	}

	type answer struct {
		run    int64
		status int
		code   runtime.Code
		err    error
	}
	answers := make(chan answer, runs*racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, w := range waiting {
		for i := range racers {
			wg.Go(func() {
				<-start
				status, code, err := clients[i%2].approve(w.id, w.digest)
				answers <- answer{w.id, status, code, err}
			})
		}
	}
	released := time.Now()
	close(start)
	wg.Wait()
	close(answers)
	t.Logf("%d decisions answered %s after they were let go", runs*racers, time.Since(released).Round(time.Millisecond))

	won := map[int64]int{}
	codes := map[string]int{}
	for a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("run %d: %v", a.run, a.err)
		case a.status == http.StatusOK:
			won[a.run]++
		case a.status == http.StatusConflict && (a.code == runtime.CodeAlreadyResuming || a.code == runtime.CodeStaleTurn):
			codes[string(a.code)]++
		default:
			t.Errorf("run %d: answered %d %q, want 200, or 409 already_resuming or stale_turn", a.run, a.status, a.code)
		}
	}
	t.Logf("losers told: %v", codes)
	for _, w := range waiting {
		if won[w.id] != 1 {
			t.Errorf("run %d: %d approvals answered 200, want exactly 1", w.id, won[w.id])
		}
		r.WaitStatus(t, w.id, runtime.StatusCompleted, 30*time.Second)
		checkExactlyOnce(t, r, w, 1)
		checkDecidedOnce(t, r, w, runtime.PathRequest)
	}
	// What node 1 sees: the same, once it applied node 0's commits.
	other := onNode(t, dsns[1])
	for _, w := range waiting {
		var refunds, settles int
		if err := other.Get(&refunds, `SELECT COUNT(*) FROM demo_refunds WHERE order_id = ?`, w.order); err != nil {
			t.Fatal(err)
		}
		if err := other.Get(&settles, `SELECT COUNT(*) FROM run_events WHERE run_id = ? AND kind = 'settle'`, w.id); err != nil {
			t.Fatal(err)
		}
		if refunds != 1 || settles != 1 {
			t.Errorf("run %d seen from node 1: %d refunds, %d settles; want 1 and 1", w.id, refunds, settles)
		}
	}
	for _, s := range servers {
		if strings.Contains(s.stderr.String(), `"level":"ERROR"`) {
			t.Errorf("server logged an error:\n%s", s.stderr)
		}
		// Rare: what the claims' read-back caught (see store.claimsKept).
		for _, line := range strings.Split(s.stderr.String(), "\n") {
			if strings.Contains(line, "a committed claim was not kept by the cluster") {
				t.Logf("answered as lost: %s", line)
			}
		}
		// What makes the classification wait for the cluster.
		if !strings.Contains(s.stderr.String(), "the database is a Galera cluster node") {
			t.Errorf("the server did not say it found a Galera node:\n%s", s.stderr)
		}
	}
}

// 2. Two work processes on two nodes and 200 decided runs: each executed
// once. Both pick the oldest decided run; SKIP LOCKED holds on its own node
// only, so across nodes one of them loses the certification and takes the
// next run.
func TestGaleraTwoWorkersOnTwoNodes(t *testing.T) {
	c := cluster(t)
	r, dsns := clusterRig(t, c, pacedYAML("batch", 0, 20*time.Millisecond, 0))
	runs := decidedRuns(t, r, "batch", 200)
	long := "--lease=20s"
	started := time.Now()
	w1 := startWorkOn(t, r, dsns[1], long, "--workers", "4")
	w2 := startWorkOn(t, r, dsns[2], long, "--workers", "4")
	checkEachExecutedOnce(t, r, runs, w1, w2)
	t.Logf("200 runs executed %s after the workers started", time.Since(started).Round(time.Millisecond))
}

// 3. The event stream followed on node B while the continuation commits on
// node A: every event, in order, without a gap, then the end.
func TestGaleraEventStreamOnAnotherNode(t *testing.T) {
	c := cluster(t)
	r, dsns := clusterRig(t, c, pacedYAML("followed", 5, 200*time.Millisecond, 0))
	w := r.waiting(t, "followed")
	a := startServe(t, dsns[0], "--workers", "0", lease)
	b := startServe(t, dsns[1], "--workers", "0", lease)
	decider := newAPIClient(t, r, a, r.operator, runtime.ScopeRunDecide)
	st := decider.stream(t, http.MethodPost, fmt.Sprintf("/api/runs/%d/decisions", w.id),
		map[string]string{"turn_digest": w.digest, "decision": "approve"})
	defer st.Close()
	st.Next(t, 10*time.Second) // the claim went through: the run continues on node A

	// Followed from its first event, while it continues.
	owner := newAPIClient(t, r, b, r.owner, runtime.ScopeRunRead)
	follower := owner.stream(t, http.MethodGet, fmt.Sprintf("/api/runs/%d/events?after_seq=0", w.id), nil)
	defer follower.Close()
	if l := follower.Next(t, 10*time.Second); l.Type() != "attached" || l.Raw == "" || !strings.Contains(l.Raw, `"live":true`) {
		t.Fatalf("first line of the event stream on node B = %s, want attached to a live run", l.Raw)
	}
	if lines, err := st.Wait(t, 60*time.Second); err != nil || len(lines) == 0 || lines[len(lines)-1].Type() != "done" {
		t.Fatalf("the decision's stream on node A = %v (%v), want it to end with done", st, err)
	}

	lines := follower.Rest(t, 30*time.Second)
	var seqs []int
	for _, l := range lines {
		switch l.Type() {
		case "event":
			seqs = append(seqs, l.Int("seq"))
		case "keepalive":
		case "end":
		default:
			t.Errorf("event stream line %s, want event, keepalive or end", l.Raw)
		}
	}
	if len(lines) == 0 || lines[len(lines)-1].Type() != "end" {
		t.Fatalf("the event stream on node B did not end with end: %v", follower)
	}
	var stored []int
	for _, e := range r.Gapless(t, w.id) {
		stored = append(stored, e.Seq)
	}
	// The waiting run had its first events before the stream attached at
	// after_seq=0: the stream sends those too.
	if !slices.Equal(seqs, stored) {
		t.Errorf("events seen on node B = %v, want every stored one in order: %v", seqs, stored)
	}
}

// 4. A node killed (kill -9 of its mariadbd) while a continuation on it has
// a write in flight: the instance on that node stops the continuation as
// a lost lease does, and its client's stream ends with an error line; a
// worker on a surviving node recovers the run and asks again about the
// write, which it never repeats. The node then rejoins the cluster.
func TestGaleraNodeKilledMidContinuation(t *testing.T) {
	c := cluster(t)
	const victim = 2
	r, dsns := clusterRig(t, c, pacedYAML("doomed", 1, 100*time.Millisecond, 5))
	w := r.waiting(t, "doomed")
	s := startServe(t, dsns[victim], "--workers", "0", lease)
	wk := startWorkOn(t, r, dsns[0], lease)
	decider := newAPIClient(t, r, s, r.operator, runtime.ScopeRunDecide)
	st := decider.stream(t, http.MethodPost, fmt.Sprintf("/api/runs/%d/decisions", w.id),
		map[string]string{"turn_digest": w.digest, "decision": "approve"})
	defer st.Close()
	r.WaitRun(t, w.id, 10*time.Second, "a run with a write in flight",
		func(r *runtime.Run) bool { return r.PendingEffect != "" })

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := c.Rejoin(ctx, victim); err != nil {
			t.Errorf("node %d did not rejoin: %v", victim, err)
		}
	})
	if err := c.Kill(victim); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	lines, err := st.Wait(t, 60*time.Second)
	if err != nil {
		t.Fatalf("the stream of the dead node's client did not end: %v (%v)", st, err)
	}
	last := lines[len(lines)-1]
	if last.Type() != "error" {
		t.Errorf("last line of the dead node's stream = %s, want an error line", last.Raw)
	}
	t.Logf("the dead node's stream ended %s after the kill with %s", time.Since(killed).Round(time.Millisecond), last.Raw)

	again := r.WaitStatus(t, w.id, runtime.StatusWaitingForApproval, 60*time.Second)
	t.Logf("the worker on node 0 asked again %s after the kill", time.Since(killed).Round(time.Millisecond))
	if again.TurnDigest == "" || again.TurnDigest == w.digest || again.PendingEffect != "" {
		t.Errorf("run %d after the recovery = digest %q, pending %q; want a new digest and no pending effect", w.id, again.TurnDigest, again.PendingEffect)
	}
	if n := r.Refunds(t, w.order); n != 0 {
		t.Errorf("order %s refunded %d times: the interrupted write ran again", w.order, n)
	}
	var note string
	for _, e := range r.Gapless(t, w.id) {
		if e.Kind == runtime.KindSuspend {
			var p struct {
				Note string `json:"note"`
			}
			json.Unmarshal([]byte(e.Payload), &p)
			note = p.Note
		}
	}
	if note != interruptedNote {
		t.Errorf("the last suspension's note = %q, want %q", note, interruptedNote)
	}
	if got := r.Decisions(t, w.id); len(got) != 1 {
		t.Errorf("%d decisions, want the first one only", len(got))
	}
	if _, code := terminate(t, wk, 15*time.Second); code != 0 {
		t.Errorf("turnstile work exit status = %d, want 0", code)
	}
	if got := finishedBy(t, wk)[w.id]; !slices.Equal(got, []string{"waiting_for_approval"}) {
		t.Errorf("the worker finished run %d with %v, want [waiting_for_approval]", w.id, got)
	}
}

// 5. A node cut off from the others (outside the primary component) takes
// no reads or writes (error 1047) until it is back: the instance on it
// answers a decision 503 with Retry-After and a code that says so, and
// writes nothing; once the node rejoined, the same decision goes through.
func TestGaleraNodeOutsideThePrimaryComponent(t *testing.T) {
	c := cluster(t)
	const cut = 1
	r, dsns := clusterRig(t, c, pacedYAML("cut", 0, 10*time.Millisecond, 0))
	w := r.waiting(t, "cut")
	s := startServe(t, dsns[cut], "--workers", "0", lease)
	decider := newAPIClient(t, r, s, r.operator, runtime.ScopeRunDecide)

	node := onNode(t, dsns[cut])
	setIsolated := func(on bool) {
		t.Helper()
		v := map[bool]string{true: "1", false: "0"}[on]
		if _, err := node.Exec("SET GLOBAL wsrep_provider_options = 'gmcast.isolate=" + v + "'"); err != nil {
			t.Fatal(err)
		}
	}
	setIsolated(true)
	t.Cleanup(func() {
		setIsolated(false)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := c.WaitSynced(ctx, c.Size()); err != nil {
			t.Errorf("node %d did not come back: %v", cut, err)
		}
	})
	if !testrig.Eventually(30*time.Second, func() bool {
		var name, status string
		return node.QueryRow("SHOW STATUS LIKE 'wsrep_cluster_status'").Scan(&name, &status) == nil && status == "non-Primary"
	}) {
		t.Fatalf("node %d did not leave the primary component within 30s", cut)
	}
	t.Logf("node %d left the primary component", cut)

	resp, err := decider.do(http.MethodPost, fmt.Sprintf("/api/runs/%d/decisions", w.id),
		map[string]string{"turn_digest": w.digest, "decision": "approve"}, "")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(raw), `"database_not_ready"`) {
		t.Errorf("decision on the cut-off node = %d (Retry-After %q) %s, want 503 database_not_ready with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"), raw)
	}
	// The log line left before the answer, but reaches the test through
	// a pipe of its own.
	if !testrig.Eventually(5*time.Second, func() bool { return strings.Contains(s.stderr.String(), "database node not ready") }) {
		t.Errorf("the server logged no line that says the node is not ready:\n%s", s.stderr)
	}
	// A load balancer checking /readyz sends no traffic here meanwhile.
	if ready, err := http.Get("http://" + s.addr + "/readyz"); err != nil || ready.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz on the cut-off node's instance = %v (%v), want 503", ready, err)
	} else {
		ready.Body.Close()
	}
	if got := r.Run(t, w.id); got.Status != runtime.StatusWaitingForApproval || len(r.Decisions(t, w.id)) != 0 {
		t.Errorf("run %d after the refused decision = %s with %d decisions, want it waiting with none", w.id, got.Status, len(r.Decisions(t, w.id)))
	}

	setIsolated(false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.WaitSynced(ctx, c.Size()); err != nil {
		t.Fatal(err)
	}
	if status, code, err := decider.approve(w.id, w.digest); err != nil || status != http.StatusOK {
		t.Fatalf("the same decision once the node is back = %d %q (%v), want 200", status, code, err)
	}
	r.WaitStatus(t, w.id, runtime.StatusCompleted, 30*time.Second)
	checkExactlyOnce(t, r, w, 1)
}

// 6. What one node wrote a moment ago, another node's instance reads at
// once: a bearer token made through node 0 authenticates on node 1 (a miss
// asks again, waiting for the cluster), and a session signed in on the
// instance on node 0 holds on the instance on node 1 (its reads wait for
// the cluster), as a load balancer without sticky sessions needs. Node 1
// is held behind for that moment: FLUSH TABLES WITH READ LOCK stops it
// applying the other nodes' commits until the lock goes.
func TestGaleraTokenAndSessionOnAnotherNode(t *testing.T) {
	c := cluster(t)
	r, dsns := clusterRig(t, c, pacedYAML("elsewhere", 0, 10*time.Millisecond, 0))
	a := startServe(t, dsns[0], "--workers", "0", lease)
	b := startServe(t, dsns[1], "--workers", "0", lease)

	ctx := context.Background()
	lock, err := onNode(t, dsns[1]).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK"); err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan struct{})
	unlock := sync.OnceFunc(func() {
		lock.ExecContext(ctx, "UNLOCK TABLES")
		close(unlocked)
	})
	defer unlock()

	client := newAPIClient(t, r, b, r.operator, runtime.ScopeRunRead)
	br := signIn(t, a.addr, "operator")
	var count int
	if err := onNode(t, dsns[1]).Get(&count, `SELECT COUNT(*) FROM api_tokens`); err != nil || count != 0 {
		t.Fatalf("node 1 sees %d tokens (%v) while it is held behind, want 0: the test would prove nothing", count, err)
	}
	time.AfterFunc(2*time.Second, unlock)

	var wg sync.WaitGroup
	wg.Go(func() {
		resp, err := client.do(http.MethodGet, "/api/approvals", nil, "")
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("a token made through node 0, used at once on node 1 = %d, want 200", resp.StatusCode)
		}
	})
	wg.Go(func() {
		// The cookie jar sends the session to every port of 127.0.0.1.
		req, _ := http.NewRequest(http.MethodGet, "http://"+b.addr+"/inbox", nil)
		resp, err := br.client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "operator") {
			t.Errorf("a session signed in on node 0, used at once on node 1 = %d, want the inbox (200)", resp.StatusCode)
		}
	})
	wg.Wait()
	select {
	case <-unlocked:
	default:
		t.Errorf("both answered while node 1 was still held behind: they did not need to wait")
	}
}
