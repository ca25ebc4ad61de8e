package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// A bulk decides each run on its own: a refusal of one (a stale digest, an
// unknown run, a four-eyes initiator, a run named twice) is that run's
// answer and stops none of the others, and every claimed run is decided
// exactly once.
func TestDecideManyRefusesEachOnItsOwn(t *testing.T) {
	f := newFixture(t, 0, refundYAML, fourEyesYAML)
	ctx := context.Background()
	var good []runtime.Outcome
	var orders []string
	for range 4 {
		out, order := f.start(t, "refund", runtime.OriginInteractive)
		good, orders = append(good, out), append(orders, order)
	}
	stale, _ := f.start(t, "refund", runtime.OriginInteractive)
	own, _ := f.Start(t, testrig.Launch{Configuration: "four-eyes", Owner: "approver"})

	reqs := []runtime.DecideRequest{}
	add := func(id int64, digest string) {
		reqs = append(reqs, runtime.DecideRequest{RunID: id, Digest: digest, Decision: runtime.DecisionApprove,
			Actor: f.approver, Path: runtime.PathRequest})
	}
	add(good[0].RunID, good[0].Digest)
	add(stale.RunID, strings.Repeat("0", 64))
	add(good[1].RunID, good[1].Digest)
	add(999999, good[1].Digest)
	add(own.RunID, own.Digest)
	add(good[2].RunID, good[2].Digest)
	add(good[0].RunID, good[0].Digest) // named twice
	add(good[3].RunID, good[3].Digest)
	reqs[len(reqs)-1].Path = runtime.PathDurable

	res := f.Engine.DecideMany(ctx, reqs, nil)
	if len(res) != len(reqs) {
		t.Fatalf("got %d results for %d requests", len(res), len(reqs))
	}
	wantCodes := []runtime.Code{"", runtime.CodeStaleTurn, "", runtime.CodeNotFound, runtime.CodeFourEyes, "",
		runtime.CodeInvalidRequest, ""}
	for i, want := range wantCodes {
		if got := runtime.CodeOf(res[i].Err); got != want || (want == "" && res[i].Err != nil) {
			t.Errorf("request %d (run %d): got %v, want code %q", i, reqs[i].RunID, res[i].Err, want)
		}
		if res[i].RunID != reqs[i].RunID {
			t.Errorf("result %d names run %d, want %d", i, res[i].RunID, reqs[i].RunID)
		}
	}
	for _, i := range []int{0, 2, 5} {
		c := res[i].Continuation
		if c == nil {
			t.Fatalf("request %d: no continuation on the request path", i)
		}
		if out := c.Run(ctx, nil); out.Status != runtime.StatusCompleted {
			t.Errorf("run %d after the bulk: %s (%v)", out.RunID, out.Status, out.Err)
		}
	}
	if res[7].Continuation != nil || f.Run(t, good[3].RunID).Status != runtime.StatusDecided {
		t.Errorf("the durable request: continuation %v, run %s; want none and decided", res[7].Continuation, f.Run(t, good[3].RunID).Status)
	}
	for i, o := range orders[:3] {
		if n := f.Refunds(t, o); n != 1 {
			t.Errorf("order %d: %d refunds, want 1", i, n)
		}
	}
	if r := f.Run(t, stale.RunID); r.Status != runtime.StatusWaitingForApproval || r.TurnDigest != stale.Digest || len(f.Decisions(t, stale.RunID)) != 0 {
		t.Errorf("the stale run moved: %s %s, %d decisions", r.Status, r.TurnDigest, len(f.Decisions(t, stale.RunID)))
	}
	if n := len(f.Decisions(t, own.RunID)); n != 0 {
		t.Errorf("the four-eyes run has %d decisions, want none", n)
	}
}

// TestDecideManyTakesNoEdits: a bulk has no way to carry an edit out, so
// a request of one that names edited arguments is refused, with nothing
// written, rather than approved (for the rest of the run, even) as the
// model proposed it.
func TestDecideManyTakesNoEdits(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, order := f.Waiting(t, "refund")
	before := f.State(t, paused.RunID)
	res := f.Engine.DecideMany(context.Background(), []runtime.DecideRequest{{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Scope: runtime.ScopeSession, Actor: f.approver, Path: runtime.PathRequest,
		Arguments: edit(paused, fmt.Sprintf(`{"order_id":%q,"amount_cents":1}`, order))}}, nil)
	if len(res) != 1 || runtime.CodeOf(res[0].Err) != runtime.CodeInvalidRequest || res[0].Continuation != nil {
		t.Fatalf("a bulk with an edit = %+v, want it refused with invalid_request", res)
	}
	f.Unchanged(t, paused.RunID, before)
}

// A bulk racing single decisions of the same runs: each run ends with one
// decision, and every loser is told already_resuming, never an error.
func TestDecideManyRacingSingles(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	ctx := context.Background()
	const n = 20
	var reqs []runtime.DecideRequest
	for range n {
		out, _ := f.start(t, "refund", runtime.OriginInteractive)
		reqs = append(reqs, runtime.DecideRequest{RunID: out.RunID, Digest: out.Digest, Decision: runtime.DecisionApprove,
			Actor: f.approver, Path: runtime.PathDurable})
	}
	singles := make(chan error, n)
	start := make(chan struct{})
	for _, r := range reqs {
		go func() {
			<-start
			_, err := f.Engine.Decide(ctx, r)
			singles <- err
		}()
	}
	close(start)
	res := f.Engine.DecideMany(ctx, reqs, nil)
	wins := 0
	for _, r := range res {
		switch {
		case r.Err == nil:
			wins++
		case runtime.CodeOf(r.Err) != runtime.CodeAlreadyResuming:
			t.Errorf("bulk, run %d: %v", r.RunID, r.Err)
		}
	}
	for range n {
		switch err := <-singles; {
		case err == nil:
			wins++
		case runtime.CodeOf(err) != runtime.CodeAlreadyResuming:
			t.Errorf("single: %v", err)
		}
	}
	if wins != n {
		t.Errorf("%d claims won for %d runs", wins, n)
	}
	for _, r := range reqs {
		if got := len(f.Decisions(t, r.RunID)); got != 1 {
			t.Errorf("run %d has %d decisions, want 1", r.RunID, got)
		}
	}
}

// BenchmarkBulkDurable decides a bulk of 500 waiting runs on the durable
// path, as POST /api/decisions does without a stream: one read of all the
// runs and their configuration, the checks of each, and the claims in a
// few scripts. It reports decisions per second. Its votes case is the
// same bulk of runs that each need two approvals: 500 votes, each the
// first of its turn, made many at once (see bulkVotes).
//
//	go test -run '^$' -bench BulkDurable -benchtime 20x ./runtime/
func BenchmarkBulkDurable(b *testing.B) {
	b.Run("decisions", func(b *testing.B) { benchmarkBulkDurable(b, refundYAML, "refund") })
	b.Run("votes", func(b *testing.B) { benchmarkBulkDurable(b, votesYAML, "votes") })
}

func benchmarkBulkDurable(b *testing.B, yaml, cfg string) {
	const bulk = 500
	f := newFixture(b, 0, yaml)
	ctx := context.Background()
	tmpl, _ := f.start(b, cfg, runtime.OriginInteractive)
	// Copies of one waiting run: the same turn, so the same digest, each
	// a run of its own (the digest is unique per run, not overall).
	var cols []string
	if err := f.DB.Select(&cols, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name = 'runs' AND column_name <> 'id' ORDER BY ordinal_position`); err != nil {
		b.Fatal(err)
	}
	list := strings.Join(cols, ", ")
	if _, err := f.DB.Exec(`CREATE TABLE seq (n INT PRIMARY KEY)`); err != nil {
		b.Fatal(err)
	}
	for i := range bulk {
		if _, err := f.DB.Exec(`INSERT INTO seq VALUES (?)`, i); err != nil {
			b.Fatal(err)
		}
	}
	var total time.Duration
	decided := 0
	for range b.N {
		var last int64
		if err := f.DB.Get(&last, `SELECT MAX(id) FROM runs`); err != nil {
			b.Fatal(err)
		}
		if _, err := f.DB.Exec(fmt.Sprintf(`INSERT INTO runs (%s) SELECT %s FROM runs r, seq WHERE r.id = ?`, list, list), tmpl.RunID); err != nil {
			b.Fatal(err)
		}
		var ids []int64
		if err := f.DB.Select(&ids, `SELECT id FROM runs WHERE id > ? ORDER BY id`, last); err != nil || len(ids) != bulk {
			b.Fatalf("%d copies, %v", len(ids), err)
		}
		reqs := make([]runtime.DecideRequest, bulk)
		for i := range reqs {
			reqs[i] = runtime.DecideRequest{RunID: ids[i], Digest: tmpl.Digest, Decision: runtime.DecisionApprove,
				Actor: f.approver, Path: runtime.PathDurable}
		}
		start := time.Now()
		res := f.Engine.DecideMany(ctx, reqs, nil)
		total += time.Since(start)
		for _, r := range res {
			if r.Err != nil || (cfg == "votes") != (r.Voted != nil) {
				b.Fatalf("run %d: %v (voted %v)", r.RunID, r.Err, r.Voted != nil)
			}
			decided++
		}
	}
	b.ReportMetric(float64(decided)/total.Seconds(), "decisions/s")
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs/bulk")
}

// A bulk's paths chosen once its checks passed: the chooser is asked once,
// for the runs about to be claimed only (not at all when none is), and
// each claim takes its path; a chooser's error refuses those runs with
// nothing claimed.
func TestDecideManyChoosesPathsAfterTheChecks(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	ctx := context.Background()
	x, _ := f.start(t, "refund", runtime.OriginInteractive)
	y, _ := f.start(t, "refund", runtime.OriginInteractive)
	stale := strings.Repeat("0", 64)
	req := func(id int64, digest string) runtime.DecideRequest {
		return runtime.DecideRequest{RunID: id, Digest: digest, Decision: runtime.DecisionApprove, Actor: f.approver}
	}
	var asked []int
	choose := func(paths ...string) runtime.PathChooser {
		return func(n int) ([]string, error) {
			asked = append(asked, n)
			return paths, nil
		}
	}

	f.Engine.DecideMany(ctx, []runtime.DecideRequest{req(x.RunID, stale), req(999999, stale)}, choose())
	if len(asked) != 0 {
		t.Errorf("chooser asked for %v with every run refused, want it not asked", asked)
	}

	busy := &runtime.Refusal{Code: "busy", Message: "no slot"}
	res := f.Engine.DecideMany(ctx, []runtime.DecideRequest{req(x.RunID, x.Digest), req(y.RunID, stale)},
		func(n int) ([]string, error) { return nil, busy })
	if res[0].Err != busy || runtime.CodeOf(res[1].Err) != runtime.CodeStaleTurn {
		t.Errorf("results %v, %v; want the chooser's refusal for the run that passed, stale_turn for the other", res[0].Err, res[1].Err)
	}
	if r := f.Run(t, x.RunID); r.Status != runtime.StatusWaitingForApproval || len(f.Decisions(t, x.RunID)) != 0 {
		t.Errorf("run %d after the chooser refused: %s, %d decisions; want it waiting, undecided", x.RunID, r.Status, len(f.Decisions(t, x.RunID)))
	}

	res = f.Engine.DecideMany(ctx, []runtime.DecideRequest{req(x.RunID, x.Digest), req(999999, stale), req(y.RunID, y.Digest)},
		choose(runtime.PathDurable, runtime.PathRequest))
	if len(asked) != 1 || asked[0] != 2 {
		t.Fatalf("chooser asked for %v, want once for the 2 runs that passed the checks", asked)
	}
	if res[0].Err != nil || res[0].Continuation != nil || f.Run(t, x.RunID).Status != runtime.StatusDecided {
		t.Errorf("first claim: %v, continuation %v, run %s; want it durable (decided)", res[0].Err, res[0].Continuation, f.Run(t, x.RunID).Status)
	}
	if res[2].Err != nil || res[2].Continuation == nil {
		t.Fatalf("second claim: %v, continuation %v; want it in the request", res[2].Err, res[2].Continuation)
	}
	if out := res[2].Continuation.Run(ctx, nil); out.Status != runtime.StatusCompleted {
		t.Errorf("run %d: %s (%v), want completed", out.RunID, out.Status, out.Err)
	}
}
