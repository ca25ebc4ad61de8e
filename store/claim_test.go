package store_test

import (
	"context"
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
		if err := w.DB.Get(&waiting, `SELECT COUNT(*) FROM information_schema.INNODB_TRX t
			JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
			WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()`); err != nil {
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
