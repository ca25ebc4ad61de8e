package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// A claim that meets a lock wait timeout (or a deadlock, which is how
// Galera reports a lost certification race) was rolled back whole, and is
// made again rather than answered as a failure: here another transaction
// holds the run's row past the first attempt's timeout and lets it go
// while the second attempt waits, and the claim wins with one decision.
func TestClaimTriesAgainAfterALockWaitTimeout(t *testing.T) {
	t.Parallel() // it waits out a lock wait timeout
	w := testrig.New(t, testrig.Configs(bulkYAML))
	ctx := context.Background()
	out, _ := w.Waiting(t, "refund")

	cfg, err := mysql.ParseDSN(w.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Params = map[string]string{"innodb_lock_wait_timeout": "2"}
	impatient, err := store.Open(ctx, cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()

	holder, err := w.DB.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback()
	if _, err := holder.Exec("SELECT id FROM runs WHERE id = ? FOR UPDATE", out.RunID); err != nil {
		t.Fatal(err)
	}
	claimed := make(chan error, 1)
	go func() {
		claimed <- store.New(impatient).Claim(ctx, runtime.Claim{RunID: out.RunID, From: runtime.StatusWaitingForApproval,
			Digest: out.Digest, To: runtime.StatusDecided, Decision: runtime.DecisionRecord{Kind: runtime.DecisionApprove,
				Scope: runtime.ScopeOnce, Tools: "refund_order", DecidedBy: w.Actor("approver").ID, Path: runtime.PathDurable}})
	}()

	// The row is let go one and a half timeouts after the claim was first
	// seen waiting: the first attempt has timed out by then, and the
	// second waits (it would time out only at twice the timeout). Neither
	// a transaction's id nor its wait's start tells two attempts apart (a
	// connection's next transaction shows the same), so this is timed.
	const timeout = 2 * time.Second
	deadline := time.Now().Add(20 * time.Second)
	var seen time.Time
	for seen.IsZero() || time.Since(seen) < timeout*3/2 {
		var waiting int
		if err := w.DB.Get(&waiting, `SELECT COUNT(*) FROM information_schema.PROCESSLIST
			WHERE DB = DATABASE() AND INFO LIKE 'SELECT id INTO @locked FROM runs%'`); err != nil {
			t.Fatal(err)
		}
		if waiting == 1 && seen.IsZero() {
			seen = time.Now()
		}
		select {
		case err := <-claimed:
			t.Fatalf("the claim ended while the row was held: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim was never seen waiting for the row")
		}
		time.Sleep(20 * time.Millisecond) // a poll of the server's lock table
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := <-claimed; err != nil {
		t.Fatalf("claim after a lock wait timeout: %v, want it won on a later try", err)
	}
	if r := w.Run(t, out.RunID); r.Status != runtime.StatusDecided || len(w.Decisions(t, out.RunID)) != 1 {
		t.Errorf("run is %s with %d decisions, want decided with one", r.Status, len(w.Decisions(t, out.RunID)))
	}
}

// Claims made at the same time go in batches (groupCommit): 3 racers for
// each of 20 runs, at once, end with one win and one decision per run and
// every other racer told its claim was lost. What a batch writes is what a
// single claim writes, an edit's arguments and a decision by nobody too.
func TestConcurrentClaimsEachWinOnce(t *testing.T) {
	w := testrig.New(t, testrig.Configs(bulkYAML))
	ctx := context.Background()
	approver := w.Actor("approver")
	claim := func(out runtime.Outcome) runtime.Claim {
		return runtime.Claim{RunID: out.RunID, From: runtime.StatusWaitingForApproval, Digest: out.Digest,
			To: runtime.StatusDecided, Decision: runtime.DecisionRecord{Kind: runtime.DecisionApprove, Scope: runtime.ScopeOnce,
				Tools: "refund_order", DecidedBy: approver.ID, Path: runtime.PathDurable}}
	}
	var runs []runtime.Outcome
	for range 20 {
		out, _ := w.Waiting(t, "refund")
		runs = append(runs, out)
	}
	type result struct {
		run int64
		err error
	}
	results := make(chan result, 3*len(runs))
	start := make(chan struct{})
	for _, out := range runs {
		for range 3 {
			go func() {
				<-start
				results <- result{out.RunID, w.Store.Claim(ctx, claim(out))}
			}()
		}
	}
	close(start)
	won := map[int64]int{}
	for range 3 * len(runs) {
		r := <-results
		if r.err == nil {
			won[r.run]++
		} else if !errors.Is(r.err, runtime.ErrClaimLost) {
			t.Errorf("a racer for run %d: %v, want a won or a lost claim", r.run, r.err)
		}
	}
	for _, out := range runs {
		if won[out.RunID] != 1 || len(w.Decisions(t, out.RunID)) != 1 {
			t.Errorf("run %d: %d racers won, %d decisions; want one of each", out.RunID, won[out.RunID], len(w.Decisions(t, out.RunID)))
		}
	}

	edited, _ := w.Waiting(t, "refund")
	expired, _ := w.Waiting(t, "refund")
	e, x := claim(edited), claim(expired)
	e.Decision.Arguments = []byte(`{"call_1":{"order_id":"ORD-1"}}`)
	x.Decision.Kind, x.Decision.DecidedBy, x.Decision.Reason, x.Decision.Path = runtime.DecisionDeny, 0, "no decision within 1s", "expiry"
	if errs := w.Store.ClaimMany(ctx, []runtime.Claim{e, x}); errs[0] != nil || errs[1] != nil {
		t.Fatalf("batch of an edit and an expiry: %v", errs)
	}
	var arguments []byte
	var decider *int64
	if err := w.DB.QueryRow("SELECT arguments, decided_by FROM decisions WHERE run_id = ?", edited.RunID).Scan(&arguments, &decider); err != nil {
		t.Fatal(err)
	}
	if string(arguments) != `{"call_1":{"order_id":"ORD-1"}}` || decider == nil || *decider != approver.ID {
		t.Errorf("the edit's claim stored arguments %s by %v", arguments, decider)
	}
	if err := w.DB.QueryRow("SELECT decided_by FROM decisions WHERE run_id = ?", expired.RunID).Scan(&decider); err != nil {
		t.Fatal(err)
	}
	if decider != nil {
		t.Errorf("a decision by nobody stored decided_by %d, want NULL", *decider)
	}
}
