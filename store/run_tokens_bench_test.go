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

// BenchmarkRunCredential measures what a forwarding continuation pays for
// its credential beside one step's commit, in the same run on the same
// database: "step" is BenchmarkCommit/step's commit; "interleaved" times,
// in turns, that commit, the one statement a continuation sends for its
// credential from start to end (the mint: the run's own commits revoke
// it), and a DELETE, what revoking it with a statement of its own would
// add, and reports their means and mint/step.
func BenchmarkRunCredential(b *testing.B) {
	db, _ := dbtest.New(b)
	st := store.New(db)
	ctx := context.Background()
	r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
		Status: runtime.StatusRunning, State: []byte(`{}`), ClaimedBy: "bench", Prompt: "p"}
	if err := st.CreateRun(ctx, r, time.Minute, asStored(r)); err != nil {
		b.Fatal(err)
	}
	seq := 0
	b.Run("step", func(b *testing.B) {
		payload := json.RawMessage(`{"tool":"noop","result_bytes":2,"is_error":false}`)
		msg := []byte(`{"role":"tool","tool_call_id":"call_1","tool_name":"noop","content":"ok"}`)
		for range b.N {
			seq++
			if _, err := st.Commit(ctx, runtime.Commit{RunID: r.ID, ClaimedBy: "bench", Lease: time.Minute,
				Event:    runtime.Event{Seq: seq, Kind: runtime.KindTool, Payload: payload},
				Messages: [][]byte{msg}, FirstMessage: seq}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Interleaved, each timed apart, so that both see the same load: the
	// ratio is what the figure is about.
	b.Run("interleaved", func(b *testing.B) {
		payload := json.RawMessage(`{"tool":"noop","result_bytes":2,"is_error":false}`)
		msg := []byte(`{"role":"tool","tool_call_id":"call_1","tool_name":"noop","content":"ok"}`)
		var step, mint, del time.Duration
		for range b.N {
			seq++
			t0 := time.Now()
			if _, err := st.Commit(ctx, runtime.Commit{RunID: r.ID, ClaimedBy: "bench", Lease: time.Minute,
				Event:    runtime.Event{Seq: seq, Kind: runtime.KindTool, Payload: payload},
				Messages: [][]byte{msg}, FirstMessage: seq}); err != nil {
				b.Fatal(err)
			}
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
