package store_test

import (
	"context"
	"encoding/json"
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
