package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// TestMessagesByIndexAndByTurn: a transcript written by a run's creation
// (turn 1) and by steps of turns 2 and 3 reads back a page at a time from
// an index, and as a window of turns; each row carries its turn and time.
func TestMessagesByIndexAndByTurn(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
		Status: runtime.StatusRunning, State: []byte(`{}`), ClaimedBy: "holder", Prompt: "p"}
	if err := st.CreateRun(ctx, r, time.Minute, asStored(r, []byte(`m0`), []byte(`m1`))); err != nil {
		t.Fatal(err)
	}
	// Turns 2 and 3, three messages each, as follow-ups' steps write them.
	next := 2
	for turn := 2; turn <= 3; turn++ {
		msgs := [][]byte{}
		for range 3 {
			msgs = append(msgs, fmt.Appendf(nil, "m%d", next+len(msgs)))
		}
		c := runtime.Commit{RunID: r.ID, ClaimedBy: "holder", Lease: time.Minute, Status: runtime.StatusRunning,
			Turn: turn, Messages: msgs, FirstMessage: next,
			Event: runtime.Event{Seq: turn, Kind: runtime.KindLLM, Payload: []byte(`{}`)}}
		if _, err := st.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
		next += len(msgs)
	}
	read := func(q runtime.MessageRange) string {
		t.Helper()
		rows, err := st.Messages(ctx, r.ID, q)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, m := range rows {
			if string(m.Body) != fmt.Sprintf("m%d", m.Idx) || m.CreatedAt.IsZero() {
				t.Errorf("row %d: body %q, created %v", m.Idx, m.Body, m.CreatedAt)
			}
			out += fmt.Sprintf("%d:%d ", m.Idx, m.Turn)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    runtime.MessageRange
		want string
	}{
		{"all", runtime.MessageRange{AfterIdx: -1, Limit: 100}, "0:1 1:1 2:2 3:2 4:2 5:3 6:3 7:3 "},
		{"a page", runtime.MessageRange{AfterIdx: -1, Limit: 3}, "0:1 1:1 2:2 "},
		{"the next page", runtime.MessageRange{AfterIdx: 2, Limit: 3}, "3:2 4:2 5:3 "},
		{"the last page", runtime.MessageRange{AfterIdx: 5, Limit: 3}, "6:3 7:3 "},
		{"past the end", runtime.MessageRange{AfterIdx: 7, Limit: 3}, ""},
		{"turn 2", runtime.MessageRange{AfterIdx: -1, FromTurn: 2, ToTurn: 2, Limit: 100}, "2:2 3:2 4:2 "},
		{"turns 2 on", runtime.MessageRange{AfterIdx: -1, FromTurn: 2, Limit: 100}, "2:2 3:2 4:2 5:3 6:3 7:3 "},
		{"up to turn 1", runtime.MessageRange{AfterIdx: -1, ToTurn: 1, Limit: 100}, "0:1 1:1 "},
		{"no such turn", runtime.MessageRange{AfterIdx: -1, FromTurn: 4, Limit: 100}, ""},
		{"turns 1 to 3, limited", runtime.MessageRange{AfterIdx: -1, FromTurn: 1, ToTurn: 3, Limit: 4}, "0:1 1:1 2:2 3:2 "},
	} {
		if got := read(tc.q); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	if rows, err := st.Messages(ctx, r.ID+1000, runtime.MessageRange{AfterIdx: -1, Limit: 10}); err != nil || rows == nil || len(rows) != 0 {
		t.Errorf("a run that does not exist: %v, %v; want an empty list", rows, err)
	}
}
