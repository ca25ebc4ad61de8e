package main

// Reliability tests of the durable path, recovery and hand-off, through
// real child processes ("turnstile serve", "turnstile work") on real MySQL.
// Runs are started in the test's database by the test's own engine, so
// they wait for a decision before any child process starts; the decisions
// are made through the web inbox, as an operator would.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// interruptedNote is what a run whose write was interrupted tells its
// decider (runtime's interruptedNote).
const interruptedNote = "The previous attempt was interrupted; its effect is unknown. Check before approving it again."

// lease is the --lease flag of every child process.
var lease = "--lease=" + testLease.String()

func recordedFlash(id int64) string {
	return fmt.Sprintf("Decision recorded; run %d continues in the background.", id)
}

// checkExactlyOnce asserts what every finished continuation of these tests
// owes: its order refunded once, its events 1..N, one approval and one
// settle per decided turn.
func checkExactlyOnce(t *testing.T, r *rig, w waitingRun, approvals int) []runtime.Event {
	t.Helper()
	if n := r.Refunds(t, w.order); n != 1 {
		t.Errorf("run %d: order %s refunded %d times, want exactly once", w.id, w.order, n)
	}
	evs := r.Gapless(t, w.id)
	if n := testrig.CountKind(evs, runtime.KindApproval); n != approvals {
		t.Errorf("run %d: %d approval events, want %d", w.id, n, approvals)
	}
	if n := testrig.CountKind(evs, runtime.KindSettle); n != 1 {
		t.Errorf("run %d: %d settle events, want 1", w.id, n)
	}
	return evs
}

// checkDecidedOnce asserts that a run that waited once has one decision,
// on the path given, executed, and noted with how its continuation ended
// (completed) — also when another holder than the decider's finished it.
func checkDecidedOnce(t *testing.T, r *rig, w waitingRun, path string) {
	t.Helper()
	ds := r.Decisions(t, w.id)
	if len(ds) != 1 || ds[0].Digest != w.digest || ds[0].Path != path || !ds[0].Executed || ds[0].Outcome != "completed" {
		var got []string
		for _, d := range ds {
			got = append(got, fmt.Sprintf("{digest %.8s… path %s executed %t outcome %q}", d.Digest, d.Path, d.Executed, d.Outcome))
		}
		t.Errorf("decisions of run %d = %v, want one on digest %.8s…, path %s, executed, outcome \"completed\"", w.id, got, w.digest, path)
	}
}

// 1. A native (no-JS) POST in auto mode with a worker alive takes the
// durable path: 303 at once with "Decision recorded", and a worker
// finishes the run.
func TestNativeDecisionIsRecordedAndAWorkerFinishesIt(t *testing.T) {
	r := newRig(t, pacedYAML("paced", 3, time.Second, 0))
	w := r.waiting(t, "paced")
	s := startServe(t, r.DSN, "--decision-path", "auto", lease) // embedded workers: 2
	waitWorkerRow(t, r, s.cmd.Process.Pid, 15*time.Second)
	b := signIn(t, s.addr, "operator")
	digest := b.digestOf(t, w.id)
	if digest != w.digest {
		t.Fatalf("inbox digest of run %d = %q, want %q", w.id, digest, w.digest)
	}

	start := time.Now()
	resp := b.decide(t, w.id, digest, false)
	took := time.Since(start)
	resp.Body.Close()
	if where := fmt.Sprintf("/inbox/runs/%d", w.id); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != where {
		t.Fatalf("native decision = %d to %q, want 303 to %s, the run's page", resp.StatusCode, resp.Header.Get("Location"), where)
	}
	t.Logf("the native decision answered 303 after %s", took)
	if took >= time.Second {
		t.Errorf("native decision answered after %s, want under a second (the run takes about 4 s)", took)
	}
	if got, want := b.inbox(t).flash, recordedFlash(w.id); got != want {
		t.Errorf("flash after the decision = %q, want %q", got, want)
	}
	if got := r.Run(t, w.id).Status; got == runtime.StatusCompleted {
		t.Errorf("run %d completed before the 303 was read: the POST waited for the continuation", w.id)
	}

	r.WaitStatus(t, w.id, runtime.StatusCompleted, 30*time.Second)
	checkExactlyOnce(t, r, w, 1)
	checkDecidedOnce(t, r, w, runtime.PathDurable)
	s.stop(t)
	if got := finishedBy(t, s)[w.id]; !slices.Equal(got, []string{"completed"}) {
		t.Errorf("the server's workers finished run %d with %v, want [completed]", w.id, got)
	}
}

// 2. A server killed with SIGKILL in the middle of streamed continuations
// loses nothing: a separate worker process takes the runs over when their
// leases expire and finishes them, every order refunded exactly once.
func TestKilledServerContinuationsAreFinishedByAWorker(t *testing.T) {
	r := newRig(t, pacedYAML("paced", 5, time.Second, 0))
	var runs []waitingRun
	for range 3 {
		runs = append(runs, r.waiting(t, "paced"))
	}
	s := startServe(t, r.DSN, "--workers", "0", lease)
	b := signIn(t, s.addr, "operator")
	page := b.inbox(t)
	var streams []*inboxStream
	for _, w := range runs {
		streams = append(streams, b.stream(t, w.id, page.digests[w.id]))
	}
	for _, st := range streams {
		// Approval, refund, a round: the write is behind us, the run is
		// in the middle of its checks.
		st.waitSteps(t, 3, 15*time.Second)
	}
	for _, w := range runs {
		if got := r.Run(t, w.id); got.Status != runtime.StatusRunning || got.ClaimedBy == "" {
			t.Fatalf("run %d before the kill = %+v, want running and claimed", w.id, got)
		}
	}
	kill9(t, s)
	for _, st := range streams {
		lines, _ := st.Wait(t, 10*time.Second)
		if n := len(lines); n > 0 && lines[n-1].Type() == "settled" {
			t.Errorf("the stream of run %d ended with settled although its server was killed mid-run: %v", st.run, st)
		}
	}

	wk := startWork(t, r, lease, "--workers", "3")
	for _, w := range runs {
		r.WaitStatus(t, w.id, runtime.StatusCompleted, 40*time.Second)
		checkExactlyOnce(t, r, w, 1)
		checkDecidedOnce(t, r, w, runtime.PathRequest)
	}
	if _, code := terminate(t, wk, 15*time.Second); code != 0 {
		t.Errorf("turnstile work exit status = %d, want 0; stderr:\n%s", code, wk.stderr)
	}
	fin := finishedBy(t, wk)
	for _, w := range runs {
		if got := fin[w.id]; !slices.Equal(got, []string{"completed"}) {
			t.Errorf("the worker process finished run %d with %v, want [completed]", w.id, got)
		}
	}
}

// 3. A server killed while a non-idempotent write is in flight: the worker
// that recovers the run does not repeat the write; it offers the run to a
// person again, with a new digest and the interrupted note. Approving that
// new turn refunds once.
func TestWriteInFlightAtAKillIsOfferedAgainNotRepeated(t *testing.T) {
	r := newRig(t, pacedYAML("processing", 0, 100*time.Millisecond, 5))
	w := r.waiting(t, "processing")
	s := startServe(t, r.DSN, "--workers", "0", lease)
	b := signIn(t, s.addr, "operator")
	st := b.stream(t, w.id, b.digestOf(t, w.id))
	approved := time.Now()
	inFlight := r.WaitRun(t, w.id, 5*time.Second, "a run with a write in flight",
		func(r *runtime.Run) bool { return r.PendingEffect != "" })
	// The scenario: the payment provider takes 5 s; the process dies about
	// a second into it.
	time.Sleep(time.Until(approved.Add(time.Second)))
	if n := r.Refunds(t, w.order); n != 0 {
		t.Fatalf("order %s has %d refunds before the kill; the write was not in flight", w.order, n)
	}
	if got := r.Run(t, w.id).PendingEffect; got != inFlight.PendingEffect {
		t.Fatalf("pending_effect before the kill = %q, want %q still", got, inFlight.PendingEffect)
	}
	kill9(t, s)
	st.Wait(t, 10*time.Second)

	wk := startWork(t, r, lease)
	again := r.WaitStatus(t, w.id, runtime.StatusWaitingForApproval, 30*time.Second)
	if again.TurnDigest == "" || again.TurnDigest == w.digest {
		t.Errorf("digest after the recovery = %q, want a new one (the first was %q)", again.TurnDigest, w.digest)
	}
	if again.PendingEffect != "" || again.ClaimedBy != "" {
		t.Errorf("run %d after the recovery = %+v, want no pending effect and no holder", w.id, again)
	}
	if n := r.Refunds(t, w.order); n != 0 {
		t.Fatalf("order %s refunded %d times after the recovery: the interrupted write was repeated", w.order, n)
	}
	evs := r.Gapless(t, w.id)
	var last runtime.Event
	for _, e := range evs {
		if e.Kind == runtime.KindSuspend {
			last = e
		}
	}
	var p struct {
		Note   string `json:"note"`
		Digest string `json:"digest"`
	}
	if err := json.Unmarshal([]byte(last.Payload), &p); err != nil {
		t.Fatalf("last suspend event %+v: %v", last, err)
	}
	if p.Note != interruptedNote || p.Digest != again.TurnDigest {
		t.Errorf("last suspend event = %s, want note %q and digest %s", last.Payload, interruptedNote, again.TurnDigest)
	}
	if n := len(r.Decisions(t, w.id)); n != 1 {
		t.Errorf("%d decisions after the recovery, want the first one only", n)
	}

	// A person approves the new turn, on a new server.
	s2 := startServe(t, r.DSN, "--workers", "0", lease)
	b2 := signIn(t, s2.addr, "operator")
	page := b2.inbox(t)
	if page.digests[w.id] != again.TurnDigest {
		t.Fatalf("inbox digest of run %d = %q, want the new %q", w.id, page.digests[w.id], again.TurnDigest)
	}
	if page.notes[w.id] != interruptedNote {
		t.Errorf("inbox note of run %d = %q, want %q", w.id, page.notes[w.id], interruptedNote)
	}
	lines, err := b2.stream(t, w.id, again.TurnDigest).Wait(t, 30*time.Second)
	if err != nil || len(lines) == 0 || lines[len(lines)-1].Type() != "settled" {
		t.Errorf("stream of the second approval = %v (%v), want it to end with settled", lines, err)
	}
	r.WaitStatus(t, w.id, runtime.StatusCompleted, 10*time.Second)
	checkExactlyOnce(t, r, w, 2)
	// Each decision notes how its continuation ended: the first paused the
	// run again (through the worker's recovery), the second completed it.
	ds := r.Decisions(t, w.id)
	if len(ds) != 2 || ds[0].Digest != w.digest || ds[0].Outcome != "waiting" ||
		ds[1].Digest != again.TurnDigest || ds[1].Outcome != "completed" || !ds[0].Executed || !ds[1].Executed {
		var got []string
		for _, d := range ds {
			got = append(got, fmt.Sprintf("{digest %.8s… executed %t outcome %q}", d.Digest, d.Executed, d.Outcome))
		}
		t.Errorf("decisions of run %d = %v, want the first (%.8s…) executed with outcome \"waiting\", the second (%.8s…) executed with outcome \"completed\"",
			w.id, got, w.digest, again.TurnDigest)
	}
	var callID string
	if err := r.DB.Get(&callID, `SELECT call_id FROM demo_refunds WHERE order_id = ?`, w.order); err != nil {
		t.Fatal(err)
	}
	if callID != inFlight.PendingEffect {
		t.Errorf("the refund's call id = %q, want the interrupted call %q", callID, inFlight.PendingEffect)
	}
	s2.stop(t)
	if _, code := terminate(t, wk, 15*time.Second); code != 0 {
		t.Errorf("turnstile work exit status = %d, want 0", code)
	}
}

// 4. SIGTERM in the middle of ten streamed continuations: each hands its
// run back at the next step boundary and its stream ends with "settled";
// the server exits 0 within --shutdown-timeout; a worker process finishes
// every run, no order refunded twice.
func TestSIGTERMHandsStreamedContinuationsToAWorker(t *testing.T) {
	r := newRig(t, pacedYAML("paced", 5, time.Second, 0))
	var runs []waitingRun
	for range 10 {
		runs = append(runs, r.waiting(t, "paced"))
	}
	wk := startWork(t, r, lease, "--workers", "10")
	s := startServe(t, r.DSN, "--workers", "0", lease, "--shutdown-timeout", "20s")
	b := signIn(t, s.addr, "operator")
	page := b.inbox(t)
	var streams []*inboxStream
	for _, w := range runs {
		streams = append(streams, b.stream(t, w.id, page.digests[w.id]))
	}
	for _, st := range streams {
		st.waitSteps(t, 2, 15*time.Second)
	}

	took, code := terminate(t, s, 25*time.Second)
	if code != 0 {
		t.Errorf("serve exit status after SIGTERM = %d, want 0; stderr:\n%s", code, s.stderr)
	}
	if took > 20*time.Second {
		t.Errorf("serve took %s to exit, more than its --shutdown-timeout of 20s", took)
	}
	t.Logf("serve exited %s after SIGTERM", took)
	for _, st := range streams {
		lines, err := st.Wait(t, 5*time.Second)
		if err != nil || len(lines) == 0 || lines[len(lines)-1].Type() != "settled" {
			t.Errorf("the stream of run %d = %v (%v), want it to end with {\"type\":\"settled\"}", st.run, st, err)
		}
	}
	// The worker process took the runs over. It is stopped in turn, in the
	// middle of them, and hands them back the same way.
	for _, w := range runs {
		r.WaitRun(t, w.id, 10*time.Second, "running in the worker process", func(r *runtime.Run) bool {
			return r.Status == runtime.StatusRunning && r.ClaimedBy != ""
		})
	}
	took, code = terminate(t, wk, 15*time.Second)
	if code != 0 {
		t.Errorf("turnstile work exit status after SIGTERM = %d, want 0; stderr:\n%s", code, wk.stderr)
	}
	t.Logf("turnstile work exited %s after SIGTERM", took)
	for _, w := range runs {
		if got := r.Run(t, w.id); got.Status != runtime.StatusDecided || got.ClaimedBy != "" {
			t.Errorf("run %d after the worker process stopped = %+v, want it handed back: decided, unclaimed", w.id, got)
		}
	}
	wk2 := startWork(t, r, lease, "--workers", "10")
	for _, w := range runs {
		r.WaitStatus(t, w.id, runtime.StatusCompleted, 40*time.Second)
		checkExactlyOnce(t, r, w, 1)
		checkDecidedOnce(t, r, w, runtime.PathRequest)
	}
	if _, code := terminate(t, wk2, 15*time.Second); code != 0 {
		t.Errorf("second turnstile work exit status = %d, want 0", code)
	}
	fin1, fin2 := finishedBy(t, wk), finishedBy(t, wk2)
	for _, w := range runs {
		if got := fin1[w.id]; !slices.Equal(got, []string{"decided"}) {
			t.Errorf("the first worker process ended run %d with %v, want [decided]: handed back at its SIGTERM", w.id, got)
		}
		if got := fin2[w.id]; !slices.Equal(got, []string{"completed"}) {
			t.Errorf("the second worker process finished run %d with %v, want [completed]", w.id, got)
		}
	}
	if logged(s.logLines(t), "continuation stopped", nil) {
		t.Errorf("the server logged a stopped continuation: a run was not handed back cleanly; stderr:\n%s", s.stderr)
	}
}

// 5. Every continuation slot taken and no worker alive: a decision gets
// 503 with Retry-After and nothing is claimed. With a worker alive, the
// next decision takes the durable path instead.
func TestFullSlotsRefuseThenFallBackToAWorker(t *testing.T) {
	r := newRig(t, pacedYAML("holder", 8, time.Second, 0), pacedYAML("quick", 1, 200*time.Millisecond, 0))
	holder := r.waiting(t, "holder")
	next := r.waiting(t, "quick")
	s := startServe(t, r.DSN, "--max-continuations", "1", "--workers", "0", lease)
	b := signIn(t, s.addr, "operator")
	page := b.inbox(t)
	hs := b.stream(t, holder.id, page.digests[holder.id])
	hs.waitSteps(t, 1, 10*time.Second)

	for _, streamed := range []bool{false, true} {
		resp := b.decide(t, next.id, page.digests[next.id], streamed)
		resp.Body.Close()
		retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusServiceUnavailable || err != nil || retry <= 0 {
			t.Errorf("decision (streamed %t) with the slot taken and no worker = %d, Retry-After %q; want 503 with a positive Retry-After",
				streamed, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if got := r.Run(t, next.id); got.Status != runtime.StatusWaitingForApproval || got.TurnDigest != next.digest {
		t.Errorf("run %d after the 503s = %+v, want still waiting on digest %s", next.id, got, next.digest)
	}
	if ds := r.Decisions(t, next.id); len(ds) != 0 {
		t.Errorf("run %d has decisions %+v after the 503s, want none", next.id, ds)
	}

	wk := startWork(t, r, lease)
	// The server asks the database about workers at most once a second;
	// a refused decision claims nothing, so asking again is harmless.
	deadline := time.Now().Add(10 * time.Second)
	var resp *http.Response
	for {
		resp = b.decide(t, next.id, page.digests[next.id], true)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if where := fmt.Sprintf("/inbox/runs/%d", next.id); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != where {
		t.Fatalf("streamed decision with the slot taken and a worker alive = %d to %q, want 303 to %s (durable)",
			resp.StatusCode, resp.Header.Get("Location"), where)
	}
	if hs.Ended() {
		t.Fatalf("the holder's continuation ended before the fallback was tried; the test proves nothing: %v", hs)
	}
	if got, want := b.inbox(t).flash, recordedFlash(next.id); got != want {
		t.Errorf("flash after the durable fallback = %q, want %q", got, want)
	}
	r.WaitStatus(t, next.id, runtime.StatusCompleted, 20*time.Second)
	checkExactlyOnce(t, r, next, 1)
	checkDecidedOnce(t, r, next, runtime.PathDurable)
	if got := finishedBy(t, wk)[next.id]; !slices.Equal(got, []string{"completed"}) {
		t.Errorf("the worker process finished run %d with %v, want [completed]", next.id, got)
	}

	lines, err := hs.Wait(t, 30*time.Second)
	if err != nil || len(lines) == 0 || lines[len(lines)-1].Type() != "settled" {
		t.Errorf("the holder's stream = %v (%v), want it to end with settled", hs, err)
	}
	r.WaitStatus(t, holder.id, runtime.StatusCompleted, 10*time.Second)
	checkExactlyOnce(t, r, holder, 1)
	checkDecidedOnce(t, r, holder, runtime.PathRequest)
	s.stop(t)
}

// 6. The database restarts in the middle of a streamed continuation: the
// run ends completed (or failed with a reason), never stays running, its
// events stay consecutive and its refund happens at most once.
func TestDatabaseRestartMidContinuation(t *testing.T) {
	m := startMariaDB(t)
	db, dsn := m.createDatabase(t, "turnstile")
	r := newRigOn(t, db, dsn, pacedYAML("paced", 6, time.Second, 0))
	w := r.waiting(t, "paced")
	s := startServe(t, dsn, lease) // embedded workers recover the run
	b := signIn(t, s.addr, "operator")
	st := b.stream(t, w.id, b.digestOf(t, w.id))
	st.waitSteps(t, 3, 15*time.Second) // the refund is recorded

	m.stop(t)
	time.Sleep(3 * time.Second) // the outage
	m.start(t)

	lines, err := st.Wait(t, 60*time.Second)
	if err != nil || len(lines) == 0 || lines[len(lines)-1].Type() != "settled" {
		t.Errorf("the stream across the restart = %v (%v), want it to end with settled", st, err)
	}
	final := r.WaitRun(t, w.id, 60*time.Second, "completed or failed", func(r *runtime.Run) bool {
		return r.Status == runtime.StatusCompleted || r.Status == runtime.StatusFailed
	})
	if final.Status == runtime.StatusFailed && final.TerminationReason == "" {
		t.Errorf("run %d failed without a termination_reason", w.id)
	}
	t.Logf("run %d after the restart: %s (%s)", w.id, final.Status, final.TerminationReason)
	if n := r.Refunds(t, w.order); n > 1 {
		t.Errorf("order %s refunded %d times across the restart, want at most once", w.order, n)
	}
	evs := r.Gapless(t, w.id)
	if n := testrig.CountKind(evs, runtime.KindApproval); n != 1 {
		t.Errorf("%d approval events, want 1", n)
	}
	if n := testrig.CountKind(evs, runtime.KindSettle); n != 1 {
		t.Errorf("%d settle events, want 1", n)
	}
	if final.Status == runtime.StatusCompleted {
		checkDecidedOnce(t, r, w, runtime.PathRequest)
	}
	s.stop(t)
	// finishedBy parses every stderr line as JSON (logLines): the logs must be
	// JSON logs, also of what the MySQL driver says about the connections
	// the restart broke.
	if got := finishedBy(t, s)[w.id]; !slices.Equal(got, []string{"completed"}) {
		t.Errorf("the server's workers finished run %d with %v, want [completed]", w.id, got)
	}
}

// 7. Two worker processes and 200 decided runs: each run is executed once.
func TestTwoWorkerProcessesExecuteEachDecidedRunOnce(t *testing.T) {
	r := newRig(t, pacedYAML("batch", 0, 20*time.Millisecond, 0))
	runs := decidedRuns(t, r, "batch", 200)
	// A longer lease: nothing dies here, and a slow renewal on a loaded
	// machine must not look like a dead holder.
	long := "--lease=20s"
	w1 := startWork(t, r, long, "--workers", "4")
	w2 := startWork(t, r, long, "--workers", "4")
	checkEachExecutedOnce(t, r, runs, w1, w2)
}

// decidedRuns starts n runs of a configuration and approves each on the
// durable path, so that they wait for a worker.
func decidedRuns(t *testing.T, r *rig, configuration string, n int) []waitingRun {
	t.Helper()
	ctx := context.Background()
	runs := make([]waitingRun, n)
	for i := range runs {
		runs[i] = r.waiting(t, configuration)
		c, err := r.Engine.Decide(ctx, runtime.DecideRequest{RunID: runs[i].id, Digest: runs[i].digest,
			Decision: runtime.DecisionApprove, Actor: r.operator, Path: runtime.PathDurable})
		if err != nil || c != nil {
			t.Fatalf("durable decision of run %d = %v, %v; want no continuation and no error", runs[i].id, c, err)
		}
	}
	return runs
}

// checkEachExecutedOnce waits until every decided run completed, then
// asserts that each was executed exactly once among the worker processes
// (which it stops): one refund per order, events 1..N with one approval
// and one settle, every decision executed, one "finished" per run.
func checkEachExecutedOnce(t *testing.T, r *rig, runs []waitingRun, workers ...*server) {
	t.Helper()
	n := len(runs)
	var done int
	if !testrig.Eventually(90*time.Second, func() bool {
		done = r.Count(t, `SELECT COUNT(*) FROM runs WHERE status = 'completed'`)
		return done == n
	}) {
		t.Fatalf("%d of %d runs completed within 90s", done, n)
	}

	var badRefunds []struct {
		Order string `db:"order_id"`
		N     int    `db:"n"`
	}
	if err := r.DB.Select(&badRefunds, `SELECT order_id, COUNT(*) AS n FROM demo_refunds
		GROUP BY order_id HAVING COUNT(*) <> 1`); err != nil {
		t.Fatal(err)
	}
	refundTotal := r.Count(t, `SELECT COUNT(*) FROM demo_refunds`)
	refundedOrders := r.Count(t, `SELECT COUNT(DISTINCT order_id) FROM demo_refunds`)
	if len(badRefunds) > 0 || refundTotal != n || refundedOrders != n {
		t.Errorf("%d refunds of %d orders, orders not refunded exactly once: %v; want %d orders refunded once each",
			refundTotal, refundedOrders, badRefunds, n)
	}
	var perRun []struct {
		Run       int64 `db:"run_id"`
		Events    int   `db:"events"`
		Distinct  int   `db:"distinct_seqs"`
		MaxSeq    int   `db:"max_seq"`
		Approvals int   `db:"approvals"`
		Settles   int   `db:"settles"`
	}
	if err := r.DB.Select(&perRun, `SELECT run_id, COUNT(*) AS events, COUNT(DISTINCT seq) AS distinct_seqs,
		MAX(seq) AS max_seq, SUM(kind = 'approval') AS approvals, SUM(kind = 'settle') AS settles
		FROM run_events GROUP BY run_id`); err != nil {
		t.Fatal(err)
	}
	if len(perRun) != n {
		t.Errorf("events of %d runs, want %d", len(perRun), n)
	}
	for _, p := range perRun {
		if p.Events != p.Distinct || p.Events != p.MaxSeq || p.Approvals != 1 || p.Settles != 1 {
			t.Errorf("run %d: %d events, %d distinct seqs, last seq %d, %d approvals, %d settles; want 1..N consecutive, one approval, one settle",
				p.Run, p.Events, p.Distinct, p.MaxSeq, p.Approvals, p.Settles)
		}
	}
	if unexecuted := r.Count(t, `SELECT COUNT(*) FROM decisions WHERE executed_at IS NULL OR outcome <> 'completed'`); unexecuted != 0 {
		t.Errorf("%d decisions not executed to completion", unexecuted)
	}

	finished := make([]map[int64][]string, len(workers))
	for i, wk := range workers {
		if _, code := terminate(t, wk, 15*time.Second); code != 0 {
			t.Errorf("turnstile work exit status = %d, want 0", code)
		}
		finished[i] = finishedBy(t, wk)
	}
	for _, w := range runs {
		var got []string
		for _, f := range finished {
			got = append(got, f[w.id]...)
		}
		if !slices.Equal(got, []string{"completed"}) {
			t.Errorf("run %d was finished %v by the worker processes, want once, completed", w.id, got)
		}
	}
	counts := make([]int, len(finished))
	for i, f := range finished {
		counts[i] = len(f)
	}
	t.Logf("the worker processes finished %v runs", counts)
}

// 8. A cancel requested while a draining server hands a continuation back
// is honoured by the worker at its first step boundary: the approved write
// that was next never runs. (The server here is the test's own engine,
// drained as "serve" drains it on SIGTERM; the worker is a real process.)
func TestCancelRequestedAtAHandOffStopsTheWorkerBeforeTheWrite(t *testing.T) {
	r := newRig(t, pacedYAML("paced", 0, 100*time.Millisecond, 0))
	w := r.waiting(t, "paced")
	ctx := context.Background()
	c, err := r.Engine.Decide(ctx, runtime.DecideRequest{RunID: w.id, Digest: w.digest,
		Decision: runtime.DecisionApprove, Actor: r.operator, Path: runtime.PathRequest})
	if err != nil {
		t.Fatal(err)
	}
	out := c.Run(ctx, runtime.ObserverFunc(func(s runtime.Step) {
		if s.Kind != runtime.KindApproval {
			return
		}
		// Right after the approval is recorded, before the refund: the
		// owner cancels through another process (one through this one
		// would stop the continuation at once, before any hand-off), and
		// the server starts shutting down before its next poll of the
		// cancels could see it.
		res, err := r.NewEngine(runtime.Options{Lease: testLease}).Cancel(ctx, w.id, r.owner)
		if err != nil || res.Status != runtime.StatusRunning {
			t.Errorf("cancel of the running run = %+v, %v; want a cooperative cancel (running)", res, err)
		}
		r.Engine.Drain()
	}))
	if n := r.Refunds(t, w.order); n != 0 {
		t.Fatalf("order %s refunded %d times before the hand-off", w.order, n)
	}
	switch out.Status {
	case runtime.StatusDecided:
	case runtime.StatusCancelled:
		// The holder's own poll of the cancels (every 250 ms) saw the
		// cancel before the drain handed the run back, as it may on a
		// loaded machine: the run is cancelled here, and the write still
		// never ran.
		t.Logf("the holder saw the cancel before its hand-off; no worker needed")
		r.Gapless(t, w.id)
		return
	default:
		t.Fatalf("continuation = %+v, want it handed back as decided (or cancelled by its holder)", out)
	}

	wk := startWork(t, r, lease)
	final := r.WaitRun(t, w.id, 20*time.Second, "settled", func(r *runtime.Run) bool {
		return r.Status == runtime.StatusCancelled || r.Status == runtime.StatusCompleted ||
			r.Status == runtime.StatusFailed
	})
	if final.Status != runtime.StatusCancelled {
		t.Errorf("run %d = %s, want cancelled: its owner cancelled it before the worker took it", w.id, final.Status)
	}
	if n := r.Refunds(t, w.order); n != 0 {
		t.Errorf("order %s refunded %d times after its run's cancel was requested, want 0: the worker ran a write past a pending cancel", w.order, n)
	}
	r.Gapless(t, w.id)
	if _, code := terminate(t, wk, 15*time.Second); code != 0 {
		t.Errorf("turnstile work exit status = %d, want 0", code)
	}
}

// TestWorkServesMetrics: a worker-only deployment can be scraped: "work
// --metrics-addr" serves GET /metrics with what its workers did and what
// the database knows of the cluster.
func TestWorkServesMetrics(t *testing.T) {
	t.Parallel()
	r := newRig(t, pacedYAML("paced", 1, 0, 0))
	w := r.waiting(t, "paced")
	if _, err := r.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: w.id, Digest: w.digest,
		Decision: runtime.DecisionApprove, Actor: r.operator, Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	startWork(t, r, "--metrics-addr", addr)
	r.WaitStatus(t, w.id, runtime.StatusCompleted, 30*time.Second)
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d, %v", res.StatusCode, err)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^turnstile_workers_alive [1-9]`),
		regexp.MustCompile(`(?m)^turnstile_step_duration_seconds_count\{kind="approval"\} 1$`),
		regexp.MustCompile(`(?m)^turnstile_continuations_in_flight 0$`),
		regexp.MustCompile(`(?m)^go_sql_open_connections\{db_name="turnstile"\} `),
	} {
		if !want.Match(body) {
			t.Errorf("the worker's metrics have no line matching %s:\n%s", want, body)
		}
	}
	checkExactlyOnce(t, r, w, 1)
}
