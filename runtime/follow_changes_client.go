package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// A client of the change feed (follow_changes.go): where it attaches
// from, its lines and their cursors, its catch-up read of the store when
// it resumes from further back than the poller remembers or lags too far
// behind.

// ErrFeedDraining is what ChangeWatch.Next returns once the process
// drains for a shutdown: a feed client holds no shutdown up, and attaches
// again (to another instance, or this one restarted) from its cursor.
var ErrFeedDraining = errors.New("runtime: the process is shutting down; attach the feed again from the last cursor")

// ChangeWatch is one feed client: the changes of every run, in the order
// the poller reads them, from its cursor on. It is used by one goroutine;
// Close it when done.
type ChangeWatch struct {
	f        *changeFeed
	attached FeedCursor
	ready    bool // set up against the poller's position

	mu     sync.Mutex
	after  *FeedCursor // asked for; nil: from now
	queue  []FeedLine
	last   FeedCursor // the cursor of the last line Next returned
	resync bool       // read the changes after resyncFrom from the store
	from   int64
	failed error
	wake   chan struct{}
}

// WatchChanges attaches a feed client: from after (nil: from now on). It
// waits for the poller to know where the log stands, and returns ctx's
// error, or ErrFollowUnavailable when the store stays unreadable. It
// checks no permission: callers filter each change by its owner.
func (e *Engine) WatchChanges(ctx context.Context, after *FeedCursor) (*ChangeWatch, error) {
	f := e.changes
	w := &ChangeWatch{f: f, after: after, wake: make(chan struct{}, 1)}
	f.mu.Lock()
	f.subs[w] = struct{}{}
	if !f.running {
		f.running = true
		go pollEvery(f.pollOnce)
	}
	f.mu.Unlock()
	for {
		f.mu.Lock()
		if f.primed {
			w.setUpLocked()
			f.mu.Unlock()
			return w, nil
		}
		f.mu.Unlock()
		w.mu.Lock()
		failed := w.failed
		w.mu.Unlock()
		if failed != nil {
			w.Close()
			return nil, failed
		}
		select {
		case <-ctx.Done():
			w.Close()
			return nil, ctx.Err()
		case <-w.wake:
		}
	}
}

// setUpLocked starts the client at the poller's position: from its floor,
// or, resuming, with the recent changes after its cursor, or with a read
// of the store when they are older than the poller remembers. f.mu is
// held.
func (w *ChangeWatch) setUpLocked() {
	f := w.f
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ready = true
	now := FeedCursor{Pos: f.floor, At: f.polled}
	switch {
	case w.after == nil:
		w.attached, w.last = now, now
	case w.after.Pos >= f.recentFrom:
		w.attached, w.last = *w.after, *w.after
		var evs []RunChange
		for _, c := range f.recent {
			if c.ID > w.after.Pos {
				evs = append(evs, c)
			}
		}
		slices.SortFunc(evs, func(a, b RunChange) int { return int(a.ID - b.ID) })
		w.queue = linesOf(evs, now)
	default:
		w.attached, w.last = *w.after, *w.after
		w.resync, w.from = true, w.after.Pos
	}
}

// linesOf gives changes in id order their cursors: each the floor, or
// just below the next change's id when that is lower, so that a client
// that stops after any line misses none of the lines after it.
func linesOf(cs []RunChange, floor FeedCursor) []FeedLine {
	lines := make([]FeedLine, len(cs))
	for i, c := range cs {
		cur := floor
		if i+1 < len(cs) && cs[i+1].ID-1 < cur.Pos {
			cur.Pos = cs[i+1].ID - 1
		}
		lines[i] = FeedLine{Change: c, Cursor: cur}
	}
	return lines
}

// FeedCursor is a cursor from which a client misses no change committed
// after now: the poller's floor while it runs, else a position read from
// the store. A page takes one before it reads what it shows, for its
// script to attach the feed from.
func (e *Engine) FeedCursor(ctx context.Context) (FeedCursor, error) {
	f := e.changes
	f.mu.Lock()
	if f.primed {
		c := FeedCursor{Pos: f.floor, At: f.polled}
		f.mu.Unlock()
		return c, nil
	}
	f.mu.Unlock()
	f.queries.Add(1)
	pos, err := e.store.ChangesSettled(ctx, changeGrace)
	if err != nil {
		return FeedCursor{}, fmt.Errorf("runtime: position in the change log: %w", err)
	}
	return FeedCursor{Pos: pos, At: time.Now()}, nil
}

// FeedClients is how many feed clients are attached now.
func (e *Engine) FeedClients() int {
	e.changes.mu.Lock()
	defer e.changes.mu.Unlock()
	return len(e.changes.subs)
}

// FeedQueries counts the statements the change feed sent the store: its
// poller's, its clients' catch-up reads, and the pages' cursors.
func (e *Engine) FeedQueries() int64 { return e.changes.queries.Load() }

// Attached is the cursor the client starts from.
func (w *ChangeWatch) Attached() FeedCursor { return w.attached }

// Cursor is where the client stands: the last line's cursor, dated by
// the last poll when nothing waits for it (keepalives carry it, so that
// a client of a quiet feed does not hold a cursor that ages out).
func (w *ChangeWatch) Cursor() FeedCursor {
	w.f.mu.Lock()
	polled := w.f.polled
	w.f.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	c := w.last
	if len(w.queue) == 0 && !w.resync && polled.After(c.At) {
		c.At = polled
	}
	return c
}

// Close detaches the client; the poller stops when nobody listens.
func (w *ChangeWatch) Close() {
	w.f.mu.Lock()
	delete(w.f.subs, w)
	w.f.mu.Unlock()
}

// Next waits for changes and returns them in order. It returns ctx's
// error when ctx ends, the store's when a catch-up read fails (Next may
// be called again), ErrFollowUnavailable when the poller's reads have
// failed for longer than a database restart takes, and ErrFeedDraining
// once the process drains.
func (w *ChangeWatch) Next(ctx context.Context) ([]FeedLine, error) {
	for {
		f := w.f
		f.mu.Lock()
		w.mu.Lock()
		if w.resync {
			// From here on the poller queues what it reads; the store has
			// every change it read before, up to high.
			w.resync = false
			from, high, floor := w.from, f.high, FeedCursor{Pos: f.floor, At: f.polled}
			w.mu.Unlock()
			f.mu.Unlock()
			cs, err := f.readFrom(ctx, from, high)
			if err != nil {
				w.mu.Lock()
				w.resync, w.from = true, from
				w.mu.Unlock()
				return nil, err
			}
			w.mu.Lock()
			w.queue = append(linesOf(cs, floor), w.queue...)
			w.mu.Unlock()
			continue
		}
		f.mu.Unlock()
		if len(w.queue) > 0 {
			out := w.queue
			w.queue = nil
			w.last = out[len(out)-1].Cursor
			w.mu.Unlock()
			return out, nil
		}
		failed := w.failed
		w.mu.Unlock()
		if failed != nil {
			return nil, failed
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-f.e.draining:
			return nil, ErrFeedDraining
		case <-w.wake:
		}
	}
}

func (w *ChangeWatch) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// handLocked queues lines for the client, or has it read them from the
// store when it lags too far behind. f.mu is held.
func (w *ChangeWatch) handLocked(lines []FeedLine) {
	w.mu.Lock()
	switch {
	case w.resync:
		// The read to come covers them.
	case len(w.queue)+len(lines) > changeQueue:
		w.queue, w.resync, w.from = nil, true, w.last.Pos
	default:
		w.queue = append(w.queue, lines...)
	}
	w.failed = nil
	w.mu.Unlock()
	w.notify()
}

// readFrom reads the changes after from, up to high at least, from the
// store: a client's catch-up, one statement per changesPerQuery rows.
func (f *changeFeed) readFrom(ctx context.Context, from, high int64) ([]RunChange, error) {
	var out []RunChange
	for {
		cs, err := f.query(ctx, ChangeQuery{After: from, Limit: changesPerQuery})
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
		if len(cs) < changesPerQuery || cs[len(cs)-1].ID >= high {
			return out, nil
		}
		from = cs[len(cs)-1].ID
	}
}
