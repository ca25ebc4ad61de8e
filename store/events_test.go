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

// TestFollowedEventsReadsManyRunsInOneStatement: the statuses of 1,200
// runs (more than one IN list holds) and their events after each run's
// own seq come back together, in order; a limit cuts the events and says
// so; a run that does not exist has no status.
func TestFollowedEventsReadsManyRunsInOneStatement(t *testing.T) {
	db, _ := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	const n = 1200
	ids := make([]int64, n)
	for i := range ids {
		r := &runtime.Run{ConfigurationID: 1, OwnerID: 1, Origin: runtime.OriginInteractive,
			Status: runtime.StatusRunning, State: []byte(`{}`), ClaimedBy: "holder", Prompt: "p"}
		if err := st.CreateRun(ctx, r, time.Minute, asStored(r)); err != nil {
			t.Fatal(err)
		}
		ids[i] = r.ID
	}
	// Three events on the first and the last run; the last run settles.
	for _, id := range []int64{ids[0], ids[n-1]} {
		for seq := 1; seq <= 3; seq++ {
			c := runtime.Commit{RunID: id, ClaimedBy: "holder", Lease: time.Minute, Status: runtime.StatusRunning,
				Event: runtime.Event{Seq: seq, Kind: runtime.KindTool, Payload: []byte(fmt.Sprintf(`{"n":%d}`, seq))}}
			if seq == 3 && id == ids[n-1] {
				c.Status, c.TerminationReason, c.Event.Kind = runtime.StatusCompleted, "completed", runtime.KindSettle
			}
			if _, err := st.Commit(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	after := map[int64]int{ids[n-1] + 1000: 0} // no such run
	for _, id := range ids {
		after[id] = 0
	}
	after[ids[0]] = 1

	b, err := st.FollowedEvents(ctx, after, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Statuses) != n || b.Statuses[ids[1]] != runtime.StatusRunning || b.Statuses[ids[n-1]] != runtime.StatusCompleted {
		t.Errorf("%d statuses (run %d %s, run %d %s), want %d, running and completed", len(b.Statuses),
			ids[1], b.Statuses[ids[1]], ids[n-1], b.Statuses[ids[n-1]], n)
	}
	if _, ok := b.Statuses[ids[n-1]+1000]; ok {
		t.Error("a run that does not exist has a status")
	}
	var got []string
	for _, e := range b.Events {
		got = append(got, fmt.Sprintf("%d/%d %s %s", e.RunID, e.Seq, e.Kind, e.Payload))
	}
	want := []string{
		fmt.Sprintf("%d/2 tool {\"n\":2}", ids[0]), fmt.Sprintf("%d/3 tool {\"n\":3}", ids[0]),
		fmt.Sprintf("%d/1 tool {\"n\":1}", ids[n-1]), fmt.Sprintf("%d/2 tool {\"n\":2}", ids[n-1]),
		fmt.Sprintf("%d/3 settle {\"n\":3}", ids[n-1]),
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || b.Full {
		t.Errorf("events %v (full %v), want %v, not full", got, b.Full, want)
	}
	for _, e := range b.Events {
		if e.CreatedAt.IsZero() {
			t.Errorf("event %d/%d has no created_at", e.RunID, e.Seq)
		}
	}

	b, err = st.FollowedEvents(ctx, after, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Events) != 3 || !b.Full || b.Events[2].RunID != ids[n-1] || b.Events[2].Seq != 1 {
		t.Errorf("limited to 3: %d events, full %v; want the first 3 and full", len(b.Events), b.Full)
	}
}
