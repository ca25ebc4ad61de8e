package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// BenchmarkCommit measures the store's side of one step alone: the
// one-round-trip script of Commit (a tool step: lease, event and one
// transcript message, the state unchanged), beside an autocommit
// single-row INSERT ("bare") and beside the least any step must do
// ("floor"): renew the lease and append a row in one
// transaction, in one round trip.
func BenchmarkCommit(b *testing.B) {
	db, _ := dbtest.New(b)
	st := store.New(db)
	ctx := context.Background()
	if _, err := db.Exec(`CREATE TABLE bare (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
		Status: runtime.StatusRunning, State: []byte(`{}`), ClaimedBy: "bench", Prompt: "p"}
	if err := st.CreateRun(ctx, r, time.Minute, asStored(r)); err != nil {
		b.Fatal(err)
	}
	b.Run("bare", func(b *testing.B) {
		for i := range b.N {
			if _, err := db.ExecContext(ctx, `INSERT INTO bare (v) VALUES (?)`, i); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("floor", func(b *testing.B) {
		for i := range b.N {
			if _, err := db.ExecContext(ctx, `START TRANSACTION;
				UPDATE runs SET lease_expires_at = NOW(6) + INTERVAL 1 MINUTE WHERE id = ?;
				INSERT INTO bare (v) VALUES (?);
				COMMIT`, r.ID, i); err != nil {
				b.Fatal(err)
			}
		}
	})
	seq := 0
	payload := json.RawMessage(`{"tool":"noop","result_bytes":2,"is_error":false}`)
	msg := []byte(`{"role":"tool","tool_call_id":"call_1","tool_name":"noop","content":"ok"}`)
	commitStep := func(b *testing.B) {
		seq++
		_, err := st.Commit(ctx, runtime.Commit{RunID: r.ID, ClaimedBy: "bench", Lease: time.Minute,
			Event:    runtime.Event{Seq: seq, Kind: runtime.KindTool, Payload: payload},
			Messages: [][]byte{msg}, FirstMessage: seq})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("step", func(b *testing.B) {
		for range b.N {
			commitStep(b)
		}
	})
	// What a forwarding continuation pays for its credential beside a
	// step's commit: in turns, the step, the mint (the one statement a
	// credential costs: the run's own commits revoke it) and a DELETE
	// (what revoking it with a statement of its own would add), each
	// timed apart so that all three see the same load.
	b.Run("credential", func(b *testing.B) {
		var step, mint, del time.Duration
		for range b.N {
			t0 := time.Now()
			commitStep(b)
			t1 := time.Now()
			if _, err := st.MintRunToken(ctx, r.ID, r.OwnerID, "bench", time.Hour); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			// What revoking with a statement of its own would add.
			if _, err := db.ExecContext(ctx, `DELETE FROM run_tokens WHERE run_id = ?`, r.ID); err != nil {
				b.Fatal(err)
			}
			step, mint, del = step+t1.Sub(t0), mint+t2.Sub(t1), del+time.Since(t2)
		}
		n := float64(b.N)
		b.ReportMetric(float64(step.Microseconds())/n, "step-µs")
		b.ReportMetric(float64(mint.Microseconds())/n, "mint-µs")
		b.ReportMetric(float64(del.Microseconds())/n, "delete-µs")
		b.ReportMetric(float64(mint)/float64(step), "mint/step")
	})
}

// BenchmarkMintCredential measures what a forwarding run's credential adds
// to the commits that mint it as they start a continuation in a request —
// a decision's claim, and a start's CreateRun —, beside a step's commit
// for scale: in turns, each with and without a credential (a claim of a
// run put back to waiting on a new turn beforehand, not timed). The
// credential is one statement more in each commit, not a commit of its
// own.
func BenchmarkMintCredential(b *testing.B) {
	db, _ := dbtest.New(b)
	st := store.New(db)
	ctx := context.Background()
	r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
		Status: runtime.StatusRunning, State: []byte(`{}`), ClaimedBy: "bench", Prompt: "p"}
	if err := st.CreateRun(ctx, r, time.Minute, asStored(r)); err != nil {
		b.Fatal(err)
	}
	turn := 0
	claim := func(b *testing.B, cred bool) time.Duration {
		turn++
		digest := fmt.Sprintf("%064d", turn)
		if _, err := db.ExecContext(ctx, `UPDATE runs SET status = 'waiting_for_approval', turn_digest = ?,
			claimed_by = NULL, lease_expires_at = NULL WHERE id = ?`, digest, r.ID); err != nil {
			b.Fatal(err)
		}
		c := runtime.Claim{RunID: r.ID, From: runtime.StatusWaitingForApproval, Digest: digest, To: runtime.StatusRunning,
			ClaimedBy: "bench", Lease: time.Minute, Decision: runtime.DecisionRecord{Kind: runtime.DecisionApprove,
				Scope: runtime.ScopeOnce, Tools: "t", DecidedBy: 1, Path: runtime.PathRequest}}
		if cred {
			c.Credential = &runtime.CredentialMint{Token: runtime.NewRunToken(), OwnerID: 1, TTL: time.Hour}
		}
		t0 := time.Now()
		if err := st.Claim(ctx, c); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	start := func(b *testing.B, cred bool) time.Duration {
		s := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
			Status: runtime.StatusRunning, State: []byte(`{}`), ClaimedBy: "bench", Prompt: "p"}
		content := asStored(s)
		if cred {
			content = func(int64) (runtime.NewRunContent, error) {
				return runtime.NewRunContent{State: s.State, Prompt: s.Prompt,
					Credential: &runtime.CredentialMint{Token: runtime.NewRunToken(), OwnerID: 1, TTL: time.Hour}}, nil
			}
		}
		t0 := time.Now()
		if err := st.CreateRun(ctx, s, time.Minute, content); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	seq := 0
	payload := json.RawMessage(`{"tool":"noop","result_bytes":2,"is_error":false}`)
	var plain, minted, started, startedMinted, step time.Duration
	for range b.N {
		plain += claim(b, false)
		minted += claim(b, true)
		started += start(b, false)
		startedMinted += start(b, true)
		seq++
		t0 := time.Now()
		if _, err := st.Commit(ctx, runtime.Commit{RunID: r.ID, ClaimedBy: "bench", Lease: time.Minute,
			Event: runtime.Event{Seq: seq, Kind: runtime.KindTool, Payload: payload}}); err != nil {
			b.Fatal(err)
		}
		step += time.Since(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(plain.Microseconds())/n, "claim-µs")
	b.ReportMetric(float64(minted.Microseconds())/n, "claim+mint-µs")
	b.ReportMetric(float64(started.Microseconds())/n, "start-µs")
	b.ReportMetric(float64(startedMinted.Microseconds())/n, "start+mint-µs")
	b.ReportMetric(float64(step.Microseconds())/n, "step-µs")
	b.ReportMetric(float64(minted-plain)/float64(step), "claim-mint/step")
	b.ReportMetric(float64(startedMinted-started)/float64(step), "start-mint/step")
}

// BenchmarkResume measures the read every continuation starts with (the
// last seq, a transcript of four messages, the standing approvals), on the
// path of every streamed decision's first line.
func BenchmarkResume(b *testing.B) {
	db, _ := dbtest.New(b)
	st := store.New(db)
	ctx := context.Background()
	r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
		Status: runtime.StatusRunning, State: []byte(`{}`), ClaimedBy: "bench", Prompt: "p"}
	msg := []byte(`{"role":"tool","tool_call_id":"call_1","tool_name":"noop","content":"ok"}`)
	if err := st.CreateRun(ctx, r, time.Minute, asStored(r, msg, msg, msg, msg)); err != nil {
		b.Fatal(err)
	}
	if _, err := st.Commit(ctx, runtime.Commit{RunID: r.ID, ClaimedBy: "bench", Lease: time.Minute,
		Event: runtime.Event{Seq: 1, Kind: runtime.KindTool, Payload: json.RawMessage(`{}`)}, FirstMessage: 4}); err != nil {
		b.Fatal(err)
	}
	for range b.N {
		got, err := st.Resume(ctx, r.ID, true)
		if err != nil || got.LastSeq != 1 || len(got.Messages) != 4 {
			b.Fatalf("Resume = %+v, %v", got, err)
		}
	}
}
