package runtime_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// tickerYAML records a step every 75 ms or so for about a second and a
// half: a continuation that its followers watch move.
var tickerYAML = func() string {
	var b strings.Builder
	b.WriteString("identifier: ticker\nmax_iterations: 20\nprovider:\n  type: scripted\n  script:\n    rounds:\n")
	for range 10 {
		b.WriteString("      - delay: 150ms\n        tool_calls:\n          - name: noop\n            arguments: {}\n")
	}
	b.WriteString("      - text: \"done\"\ntools: [noop]\n")
	return b.String()
}()

// countingStore counts what followers ask of the store: the feed's polls
// and the reads of events.
type countingStore struct {
	*store.Store
	polls, reads atomic.Int64
}

func (c *countingStore) FollowedEvents(ctx context.Context, after map[int64]int, limit int) (runtime.FollowedBatch, error) {
	c.polls.Add(1)
	return c.Store.FollowedEvents(ctx, after, limit)
}

func (c *countingStore) Events(ctx context.Context, runID int64, afterSeq int) ([]runtime.Event, error) {
	c.reads.Add(1)
	return c.Store.Events(ctx, runID, afterSeq)
}

// countedEngine is another process whose store calls are counted.
func (f *fixture) countedEngine() (*runtime.Engine, *countingStore) {
	cs := &countingStore{Store: f.Store}
	return runtime.New(runtime.Options{Store: cs, Tools: f.Tools, Providers: scripted.Factory, Validator: schema.New()}), cs
}

// follow attaches to a run as the event stream does — the backlog after
// 0 from the store, then the feed — and returns every event's seq and
// the end status, or the error that stopped it.
func follow(ctx context.Context, e *runtime.Engine, runID int64) ([]int, runtime.Status, error) {
	backlog, err := e.Events(ctx, runID, 0)
	if err != nil {
		return nil, "", err
	}
	var seqs []int
	last := 0
	for _, ev := range backlog {
		seqs, last = append(seqs, ev.Seq), ev.Seq
	}
	w := e.Watch(runID, last)
	defer w.Close()
	for {
		u, err := w.Next(ctx)
		if err != nil {
			return seqs, "", err
		}
		if u.Ended != "" {
			return seqs, u.Ended, nil
		}
		for _, ev := range u.Events {
			seqs = append(seqs, ev.Seq)
		}
	}
}

// startTickers starts n ticker runs on e, each continuing in the
// background, and returns their ids; done is closed when all ended.
func (f *fixture) startTickers(t *testing.T, e *runtime.Engine, n int, obs func(runID int64) runtime.Observer) (ids []int64, done <-chan struct{}) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		c, err := e.Start(context.Background(), runtime.StartRequest{Configuration: "ticker", Prompt: "tick", Owner: f.owner})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.RunID())
		var o runtime.Observer
		if obs != nil {
			o = obs(c.RunID())
		}
		wg.Go(func() {
			if out := c.Run(context.Background(), o); out.Status != runtime.StatusCompleted {
				t.Errorf("run %d ended %s (%v), want completed", out.RunID, out.Status, out.Err)
			}
		})
	}
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	t.Cleanup(func() { <-ch })
	return ids, ch
}

// TestFollowersShareOnePoll: 200 followers of 20 runs that another
// process carries out cost one poll per interval in all, not one per
// follower, and each sees every event of its run once, in order, then the
// end.
func TestFollowersShareOnePoll(t *testing.T) {
	f := newFixture(t, 0, tickerYAML)
	worker := f.engine(0)
	followers, counted := f.countedEngine()
	ids, _ := f.startTickers(t, worker, 20, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type result struct {
		run  int64
		seqs []int
		end  runtime.Status
		err  error
	}
	results := make(chan result, 200)
	start := time.Now()
	for i := range 200 {
		id := ids[i%len(ids)]
		go func() {
			seqs, end, err := follow(ctx, followers, id)
			results <- result{id, seqs, end, err}
		}()
	}
	for range 200 {
		r := <-results
		if r.err != nil {
			t.Fatalf("follower of run %d: %v", r.run, r.err)
		}
		stored := f.Gapless(t, r.run)
		if want := seqRange(1, len(stored)); !slices.Equal(r.seqs, want) {
			t.Errorf("follower of run %d saw seqs %v, want %v", r.run, r.seqs, want)
		}
		if r.end != runtime.StatusCompleted {
			t.Errorf("follower of run %d ended with %s, want completed", r.run, r.end)
		}
	}
	took := time.Since(start)
	intervals := int64(took/runtime.FollowInterval) + 1
	polls := counted.polls.Load()
	t.Logf("200 followers of 20 runs for %s: %d polls (%d intervals), %d event reads", took.Round(time.Millisecond), polls, intervals, counted.reads.Load())
	// One statement per interval; a few more where an answer arrived as
	// a new follower attached between two ticks.
	if polls > intervals+3 {
		t.Errorf("the followers cost %d polls in %d intervals, want at most one per interval", polls, intervals)
	}
	// The backlog once per follower, nothing per interval.
	if reads := counted.reads.Load(); reads > 200+20 {
		t.Errorf("the followers read events %d times, want once each (200) and a catch-up at most per run", reads)
	}
}

// TestFollowerAttachesMidRun: followers that attach while the run goes on
// — after other followers have been handed events, and from scratch with
// the whole backlog — see every event once, in order.
func TestFollowerAttachesMidRun(t *testing.T) {
	f := newFixture(t, 0, tickerYAML)
	worker := f.engine(0)
	followers, _ := f.countedEngine()
	ids, _ := f.startTickers(t, worker, 1, nil)
	id := ids[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	early := make(chan []int, 1)
	go func() {
		seqs, _, err := follow(ctx, followers, id)
		if err != nil {
			t.Errorf("early follower: %v", err)
		}
		early <- seqs
	}()
	if !testrig.Eventually(10*time.Second, func() bool { return len(f.Events(t, id)) >= 6 }) {
		t.Fatal("the run recorded no 6 events")
	}
	var wg sync.WaitGroup
	late := make([][]int, 5)
	for i := range late {
		wg.Go(func() {
			seqs, end, err := follow(ctx, followers, id)
			if err != nil || end != runtime.StatusCompleted {
				t.Errorf("late follower: ended %s, %v", end, err)
			}
			late[i] = seqs
		})
	}
	wg.Wait()
	want := seqRange(1, len(f.Gapless(t, id)))
	if got := <-early; !slices.Equal(got, want) {
		t.Errorf("early follower saw %v, want %v", got, want)
	}
	for i, got := range late {
		if !slices.Equal(got, want) {
			t.Errorf("late follower %d saw %v, want %v", i, got, want)
		}
	}
}

// TestFollowersOfALocalContinuationCostNoQuery: followers of a
// continuation this very engine carries out are handed its events
// directly: no poll at all, and no read beyond their backlog.
func TestFollowersOfALocalContinuationCostNoQuery(t *testing.T) {
	f := newFixture(t, 0, tickerYAML)
	e, counted := f.countedEngine()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const n = 50
	type result struct {
		seqs []int
		end  runtime.Status
		err  error
	}
	results := make(chan result, n)
	var attach sync.Once
	// The followers attach inside the first step's observer, so that the
	// continuation records nothing before they are all watching.
	ids, done := f.startTickers(t, e, 1, func(runID int64) runtime.Observer {
		return runtime.ObserverFunc(func(runtime.Step) {
			attach.Do(func() {
				for range n {
					backlog, err := e.Events(ctx, runID, 0)
					if err != nil {
						t.Error(err)
						return
					}
					w := e.Watch(runID, backlog[len(backlog)-1].Seq)
					go func() {
						defer w.Close()
						seqs := []int{}
						for _, ev := range backlog {
							seqs = append(seqs, ev.Seq)
						}
						for {
							u, err := w.Next(ctx)
							if err != nil || u.Ended != "" {
								results <- result{seqs, u.Ended, err}
								return
							}
							for _, ev := range u.Events {
								seqs = append(seqs, ev.Seq)
							}
						}
					}()
				}
			})
		})
	})
	<-done
	want := seqRange(1, len(f.Gapless(t, ids[0])))
	for range n {
		r := <-results
		if r.err != nil || r.end != runtime.StatusCompleted || !slices.Equal(r.seqs, want) {
			t.Errorf("follower: seqs %v, end %s, %v; want %v, completed", r.seqs, r.end, r.err, want)
		}
	}
	if p := counted.polls.Load(); p != 0 {
		t.Errorf("the feed polled %d times for a continuation of its own process, want 0", p)
	}
	if r := counted.reads.Load(); r != n {
		t.Errorf("the followers read events %d times, want %d (their backlogs)", r, n)
	}
}

// TestFeedStopsWhenTheLastFollowerLeaves: once the last follower of a run
// that goes on leaves, the feed sends no more queries.
func TestFeedStopsWhenTheLastFollowerLeaves(t *testing.T) {
	f := newFixture(t, 0, tickerYAML)
	worker := f.engine(0)
	followers, counted := f.countedEngine()
	ids, done := f.startTickers(t, worker, 1, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	watches := []*runtime.Watch{followers.Watch(ids[0], 0), followers.Watch(ids[0], 0)}
	for _, w := range watches {
		if _, err := w.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if counted.polls.Load() == 0 {
		t.Fatal("the followers got events without a poll")
	}
	watches[0].Close()
	before := counted.polls.Load()
	if !testrig.Eventually(5*time.Second, func() bool { return counted.polls.Load() > before }) {
		t.Error("the feed stopped polling while a follower remained")
	}
	watches[1].Close()
	if !testrig.Eventually(5*time.Second, func() bool { return !runtime.FeedPolling(followers) }) {
		t.Fatal("the feed still polls after the last follower left")
	}
	// Stopped, it sends nothing until someone follows again.
	stopped := counted.polls.Load()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end")
	}
	if got := counted.polls.Load(); got != stopped {
		t.Errorf("the feed polled %d more times after it stopped", got-stopped)
	}
}

func seqRange(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}
