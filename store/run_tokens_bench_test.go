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
// database: "step" is BenchmarkCommit/step's commit, "mint" the one
// statement a continuation sends for its credential from start to end
// (the run's commits revoke it), "mint+delete" what revoking it with a
// statement of its own would add.
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
	b.Run("mint", func(b *testing.B) {
		for range b.N {
			if _, err := st.MintRunToken(ctx, r.ID, r.OwnerID, "bench", time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mint+delete", func(b *testing.B) {
		for range b.N {
			if _, err := st.MintRunToken(ctx, r.ID, r.OwnerID, "bench", time.Hour); err != nil {
				b.Fatal(err)
			}
			if _, err := db.ExecContext(ctx, `DELETE FROM run_tokens WHERE run_id = ?`, r.ID); err != nil {
				b.Fatal(err)
			}
		}
	})
}
