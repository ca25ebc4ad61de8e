package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Followers of a run (GET /api/runs/:id/events, a losing decider following
// the winner) cost the database nothing per follower. One feed per engine
// — per process — serves them all: a poller that asks the store once per
// FollowInterval for every followed run at once (the statuses and the new
// events in one statement), only while someone follows a run that this
// process does not run itself; and a continuation of this process hands
// each committed event to its run's followers directly, so following it
// costs no query at all. Every follower still reads its backlog from the
// store once, when it attaches.

// FollowInterval is how often the feed asks the store about the followed
// runs: a follower of another process's continuation sees an event at most
// this late (plus the query).
const FollowInterval = 250 * time.Millisecond

const (
	// followGiveUp is how long the feed's polls may keep failing (a
	// database restart) before its followers are told so.
	followGiveUp = 30 * time.Second
	// followRecent is how many of a run's latest events the feed keeps, so
	// that a follower attaching just after a poll catches up from memory.
	followRecent = 64
	// followQueue bounds the events waiting for one slow follower; beyond
	// it the follower reads them from the store (once) instead.
	followQueue = 1024
	// followRunsPerQuery and followEventsPerQuery bound one poll's
	// statement and its answer; more runs take more statements per
	// interval, more events another statement at once.
	followRunsPerQuery   = 2000
	followEventsPerQuery = 2000
	// followQueryTimeout bounds one poll, which runs on no request.
	followQueryTimeout = 10 * time.Second
	// followDeltas bounds the pieces of text waiting for one slow
	// follower; beyond it the newest are dropped: they are live only, and
	// the round's step brings the text whole.
	followDeltas = 256
)

// FollowStore is what the followers' poll needs of the store.
type FollowStore interface {
	// FollowedEvents reads, in one statement and so from one snapshot, the
	// status of each run of after and its events with a seq above after's,
	// ordered by run and seq, at most limit events. A run not found has no
	// status in the answer.
	FollowedEvents(ctx context.Context, after map[int64]int, limit int) (FollowedBatch, error)
}

// FollowedBatch is one poll's answer.
type FollowedBatch struct {
	Statuses map[int64]Status
	// Events are ordered by run id, then seq; their payloads as stored
	// (sealed when a key is set).
	Events []Event
	// Full is set when limit events came back: from the last event's run
	// on, runs may have more, and their statuses may be ahead of them.
	Full bool
}

// ErrFollowUnavailable is what Watch.Next returns once the feed's polls
// have failed for longer than a database restart takes.
var ErrFollowUnavailable = errors.New("runtime: the followed runs' events cannot be read")

// feed is an engine's followers: the runs they watch, the continuations of
// this process that hand their events over, and the poller.
type feed struct {
	e *Engine

	mu      sync.Mutex
	runs    map[int64]*watched
	local   map[int64]*localHold
	running bool   // the poller runs; it stops when nothing needs polling
	round   uint64 // counts polls; a status is news to who watched before it
	failing time.Time

	// queries counts the statements the poller sent, for tests.
	queries atomic.Int64
}

// watched is one followed run.
type watched struct {
	cursor int     // the highest seq handed to the run's watches
	recent []Event // the latest events handed over, ending at cursor
	subs   map[*Watch]struct{}
	// ended is set once every watch was handed a status that ends it:
	// there is nothing to poll for until someone attaches again.
	ended bool
}

// localHold is a continuation of this process that holds a run.
type localHold struct {
	c   *Continuation
	seq int // the highest seq it committed (or found when it started)
}

// Watch is one follower's view of a run: the events after a seq, as they
// are committed by any process, and the run's status once it no longer
// moves on its own. It is used by one goroutine; Close it when done.
type Watch struct {
	f     *feed
	runID int64
	since uint64 // the feed's round when it attached

	mu     sync.Mutex
	queue  []Event
	last   int // the highest seq Next returned (or that the caller had)
	status Status
	resync bool // read the events after last from the store: some were dropped
	failed error
	// deltas are pieces of text of a local holder's round, each due once
	// the event it came after was handed over.
	deltas []heldDelta
	wake   chan struct{}
}

// Update is what Next hands over: new events in order, or, once every
// event up to it was handed over, the status of a run that no longer
// moves on its own (waiting or settled).
type Update struct {
	Events []Event
	// Deltas are pieces of text of a round in flight (see DeltaObserver),
	// handed over only for a run a continuation of this process holds:
	// they are never stored, so no poll finds them.
	Deltas []Delta
	Ended  Status
}

// heldDelta is a piece of text waiting for its follower, after the event
// of seq after.
type heldDelta struct {
	Delta
	after int
}

func newFeed(e *Engine) *feed {
	return &feed{e: e, runs: map[int64]*watched{}, local: map[int64]*localHold{}}
}

// Watch follows a run from after its event afterSeq, which the caller has
// read (with the run's status) before: nothing between is missed, and
// nothing before is handed over again. It checks no permission: callers
// watch only runs the follower may see (Visible, Follow).
func (e *Engine) Watch(runID int64, afterSeq int) *Watch {
	f := e.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.runs[runID]
	if w == nil {
		w = &watched{cursor: afterSeq, subs: map[*Watch]struct{}{}}
		f.runs[runID] = w
	}
	w.ended = false
	sub := &Watch{f: f, runID: runID, since: f.round, last: afterSeq, wake: make(chan struct{}, 1)}
	if w.cursor > afterSeq {
		// Handed to others already: from memory when it is recent, else
		// from the store, once.
		if len(w.recent) > 0 && w.recent[0].Seq <= afterSeq+1 {
			for _, ev := range w.recent {
				if ev.Seq > afterSeq {
					sub.queue = append(sub.queue, ev)
				}
			}
		} else {
			sub.resync = true
		}
	}
	w.subs[sub] = struct{}{}
	f.startLocked()
	return sub
}

// Close stops the watch; the feed stops polling a run nobody watches.
func (w *Watch) Close() {
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.runs[w.runID]; r != nil {
		delete(r.subs, w)
		if len(r.subs) == 0 {
			delete(f.runs, w.runID)
		}
	}
}

// Next waits for news of the run: new events, or its end status (after
// every event up to it). It returns ctx's error when ctx ends, the store's
// when a catch-up read fails, and ErrFollowUnavailable when the feed's
// polls have failed for too long.
func (w *Watch) Next(ctx context.Context) (Update, error) {
	for {
		w.mu.Lock()
		if w.resync {
			w.resync = false
			last := w.last
			w.mu.Unlock()
			evs, err := w.f.e.Events(ctx, w.runID, last)
			w.mu.Lock()
			if err != nil {
				w.resync = true
				w.mu.Unlock()
				return Update{}, err
			}
			// Queued events the read also found are dropped below.
			w.queue = append(evs, w.queue...)
		}
		// Text that came before an event goes before it.
		before := math.MaxInt
		if len(w.deltas) > 0 {
			before = w.deltas[0].after
		}
		var out, rest []Event
		for i, ev := range w.queue {
			if ev.Seq <= w.last {
				continue // handed over already
			}
			if ev.Seq > before {
				rest = w.queue[i:]
				break
			}
			if ev.Seq > w.last+1 {
				// Never expected: rather than skip an event, read the
				// rest from the store.
				w.resync = true
				break
			}
			out = append(out, ev)
			w.last = ev.Seq
		}
		w.queue = rest
		if len(out) > 0 {
			w.mu.Unlock()
			return Update{Events: out}, nil
		}
		if n := w.dueDeltasLocked(); n > 0 {
			ds := make([]Delta, n)
			for i, d := range w.deltas[:n] {
				ds[i] = d.Delta
			}
			w.deltas = w.deltas[n:]
			w.mu.Unlock()
			return Update{Deltas: ds}, nil
		}
		if w.resync {
			w.mu.Unlock()
			continue
		}
		status, failed := w.status, w.failed
		w.mu.Unlock()
		switch {
		case status != "" && !status.Live():
			return Update{Ended: status}, nil
		case failed != nil:
			return Update{}, failed
		}
		select {
		case <-ctx.Done():
			return Update{}, ctx.Err()
		case <-w.wake:
		}
	}
}

// Live reports whether a run in this status may still record events
// without a person acting first.
func (s Status) Live() bool {
	return s == StatusRunning || s == StatusQueued || s == StatusDecided
}

// dueDeltasLocked counts the pieces of text at the head of the queue
// whose event was handed over.
func (w *Watch) dueDeltasLocked() int {
	n := 0
	for n < len(w.deltas) && w.deltas[n].after <= w.last {
		n++
	}
	return n
}

// handDeltas gives a watch pieces of text that came after the event of
// seq after.
func (w *Watch) handDeltas(ds []Delta, after int) {
	w.mu.Lock()
	for _, d := range ds {
		if len(w.deltas) < followDeltas {
			w.deltas = append(w.deltas, heldDelta{Delta: d, after: after})
		}
	}
	w.mu.Unlock()
	w.notify()
}

func (w *Watch) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// hand gives a watch events in order, or has it read them from the store
// when it lags too far behind.
func (w *Watch) hand(evs []Event, status Status) {
	w.mu.Lock()
	if len(evs) > 0 {
		if len(w.queue)+len(evs) > followQueue {
			w.queue, w.resync = nil, true
		} else if !w.resync {
			w.queue = append(w.queue, evs...)
		}
	}
	if status != "" {
		w.status = status
	}
	w.failed = nil
	w.mu.Unlock()
	w.notify()
}

// handLocked hands events (consecutive after r.cursor) and a status to a
// run's watches. f.mu is held.
func (r *watched) handLocked(evs []Event, status Status, round uint64) {
	if len(evs) > 0 {
		r.cursor = evs[len(evs)-1].Seq
		r.recent = append(r.recent, evs...)
		if n := len(r.recent) - followRecent; n > 0 {
			r.recent = slices.Delete(r.recent, 0, n)
		}
	}
	if status != "" && !status.Live() {
		r.ended = true
	}
	for sub := range r.subs {
		st := status
		if sub.since >= round {
			// The poll's snapshot may predate the status this watch
			// attached with.
			st = ""
			r.ended = false
		}
		if len(evs) > 0 || st != "" {
			sub.hand(evs, st)
		}
	}
}

// localRound is the round of what a holder publishes: newer than any
// status a watch attached with.
const localRound = ^uint64(0)

// hold tells the feed that c, of this process, holds its run from now on
// and will publish each event it commits: the poller leaves the run alone
// once it has caught up with c's start.
func (f *feed) hold(c *Continuation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.local[c.run.ID] = &localHold{c: c, seq: c.seq}
}

// release ends c's hold; the poller takes the run over again if it is
// followed (another process may continue it).
func (f *feed) release(c *Continuation) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.local[c.run.ID]; h != nil && h.c == c {
		delete(f.local, c.run.ID)
		f.startLocked()
	}
}

// publish hands an event c committed, and the run's status after the
// commit, to the run's followers. An event that does not follow the last
// one they were handed is left to the poller, which reads it with the ones
// before it.
func (f *feed) publish(c *Continuation, ev Event, status Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.local[c.run.ID]
	if h == nil || h.c != c {
		return
	}
	h.seq = ev.Seq
	r := f.runs[c.run.ID]
	if r == nil {
		return
	}
	if ev.Seq != r.cursor+1 {
		f.startLocked()
		return
	}
	if status == StatusRunning {
		status = ""
	}
	// The holder's commit is the newest state of the run: every watch may
	// take its status.
	r.handLocked([]Event{ev}, status, localRound)
}

// publishDeltas hands pieces of text of c's round in flight to its run's
// followers in this process.
func (f *feed) publishDeltas(c *Continuation, ds []Delta) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.local[c.run.ID]
	r := f.runs[c.run.ID]
	if h == nil || h.c != c || r == nil {
		return
	}
	for sub := range r.subs {
		sub.handDeltas(ds, h.seq)
	}
}

// pollsLocked says whether the poller must ask the store about a run that
// its watches still wait on: no continuation of this process holds it, or
// the holder lost it, or the followers have not yet been handed every
// event the holder found.
func (f *feed) pollsLocked(id int64, r *watched) bool {
	if r.ended {
		return false
	}
	h := f.local[id]
	return h == nil || h.c.lost.Load() || r.cursor < h.seq
}

func (f *feed) startLocked() {
	if f.running {
		return
	}
	for id, r := range f.runs {
		if f.pollsLocked(id, r) {
			f.running = true
			go f.loop()
			return
		}
	}
}

// loop polls every FollowInterval while any followed run needs it, then
// ends: with nobody following, the feed sends no query at all.
func (f *feed) loop() { pollEvery(f.pollOnce) }

// pollEvery runs a poller of the process — the followers' feed, the
// change feed — every FollowInterval, at once again when a poll was cut
// at its limit (poll answers 1), until a poll finds nobody to poll for
// (-1).
func pollEvery(poll func() int) {
	t := time.NewTicker(FollowInterval)
	defer t.Stop()
	for {
		more := poll()
		if more < 0 {
			return
		}
		if more > 0 {
			continue
		}
		<-t.C
	}
}

// pollOnce asks the store about every run that needs it, in statements of
// at most followRunsPerQuery runs, and hands the answers over. It returns
// -1 when there was nothing to ask (the poller has stopped), 1 when an
// answer was cut at its limit, else 0.
func (f *feed) pollOnce() int {
	f.mu.Lock()
	var batches []map[int64]int
	for id, r := range f.runs {
		if !f.pollsLocked(id, r) {
			continue
		}
		if len(batches) == 0 || len(batches[len(batches)-1]) == followRunsPerQuery {
			batches = append(batches, map[int64]int{})
		}
		batches[len(batches)-1][id] = r.cursor
	}
	if len(batches) == 0 {
		f.running = false
		f.mu.Unlock()
		return -1
	}
	f.round++
	round := f.round
	f.mu.Unlock()

	more := 0
	for _, after := range batches {
		b, err := f.query(after)
		f.mu.Lock()
		f.deliverLocked(round, after, b, err)
		f.mu.Unlock()
		if err == nil && b.Full {
			more = 1
		}
	}
	return more
}

func (f *feed) query(after map[int64]int) (FollowedBatch, error) {
	ctx, cancel := context.WithTimeout(context.Background(), followQueryTimeout)
	defer cancel()
	f.queries.Add(1)
	b, err := f.e.store.FollowedEvents(ctx, after, followEventsPerQuery)
	if err != nil {
		return b, fmt.Errorf("runtime: poll %d followed runs: %w", len(after), err)
	}
	for i := range b.Events {
		ev := &b.Events[i]
		if ev.Payload, err = f.e.openJSON(ev.Payload, EventPlace(ev.RunID, ev.Seq)); err != nil {
			ev.Payload = unreadablePayload(err)
		}
	}
	return b, nil
}

// deliverLocked hands one poll's answer to the watches, or its failure
// once polls have failed for followGiveUp. f.mu is held.
func (f *feed) deliverLocked(round uint64, after map[int64]int, b FollowedBatch, err error) {
	if err != nil {
		if f.failing.IsZero() {
			f.failing = time.Now()
		}
		f.e.log.Warn("following runs: poll failed", "runs", len(after), "err", err)
		if time.Since(f.failing) < followGiveUp {
			return
		}
		for id := range after {
			if r := f.runs[id]; r != nil {
				for sub := range r.subs {
					sub.mu.Lock()
					sub.failed = fmt.Errorf("%w: %w", ErrFollowUnavailable, err)
					sub.mu.Unlock()
					sub.notify()
				}
			}
		}
		return
	}
	f.failing = time.Time{}
	cut := int64(-1) // runs from this id on may have more events
	if b.Full && len(b.Events) > 0 {
		cut = b.Events[len(b.Events)-1].RunID
	}
	byRun := map[int64][]Event{}
	for _, ev := range b.Events {
		byRun[ev.RunID] = append(byRun[ev.RunID], ev)
	}
	for id := range after {
		r := f.runs[id]
		if r == nil {
			continue
		}
		// The snapshot's events follow after[id]; the cursor may have
		// moved on since (a holder of this process published some).
		var evs []Event
		next, gap := r.cursor+1, false
		for _, ev := range byRun[id] {
			switch {
			case ev.Seq < next:
			case ev.Seq == next:
				evs = append(evs, ev)
				next++
			default:
				gap = true
			}
		}
		// A status is only news once every event up to it is handed over.
		status := b.Statuses[id]
		if status.Live() || gap || (cut >= 0 && id >= cut) {
			status = ""
		}
		if cut >= 0 && id > cut {
			continue
		}
		r.handLocked(evs, status, round)
	}
}
