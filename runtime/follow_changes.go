package runtime

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The change feed (GET /api/feed) tells every person who may read or
// decide a run that it started, waits, was decided, settled or was erased.
// It reads the change log, run_changes: one row per such step, written in
// the step's own transaction, so that a change is never committed without
// its row. One poller per engine — per process — reads the log for every
// feed client at once, every FollowInterval, and only while someone
// listens; each client then filters what it may see.
//
// Ids are AUTO_INCREMENT values, allocated when a row is inserted, not
// when its transaction commits: a row with a lower id can become visible
// after one with a higher id (two steps committing in the other order,
// and on a Galera cluster ids interleave across nodes). The poller
// therefore never takes "the highest id read" alone for its position. It
// keeps the ids below that highest one that it has not read — gaps — and
// asks for them again in every poll (the same statement: id > high OR id
// BETWEEN gap bounds), for changeGrace; an id still unseen after that is
// taken for one that will never commit (a rolled-back step, an id InnoDB
// allocated in a batch and did not use, another node's id range). Its
// floor, the position that it hands out in cursors, is just below the
// oldest gap still open: every change at or below it has been read (or
// given up on), so a client resuming from a cursor misses nothing, and
// may see again a change above the floor it already had — duplicates are
// harmless, losses are not.

// ChangeKind is what a step did to a run, as the change feed tells it.
type ChangeKind string

// The changes the feed tells of.
const (
	ChangeStarted ChangeKind = "started" // created, or a follow-up's turn started
	ChangeWaiting ChangeKind = "waiting" // paused for a person
	ChangeDecided ChangeKind = "decided" // a person's (or an expiry's) claim won
	ChangeVoted   ChangeKind = "voted"   // an approval counted towards a turn that needs several
	ChangeSettled ChangeKind = "settled" // completed, failed or cancelled
	ChangeErased  ChangeKind = "erased"
)

const (
	// ChangeRetention is how long the change log keeps a row: the workers'
	// sweep deletes older ones.
	ChangeRetention = 24 * time.Hour
	// changeGrace is how long the poller waits for an id it skipped: the
	// longest a step may take from writing its change to committing it
	// (every such step is one short transaction; on a cluster, add the
	// time a node takes to apply another's commit).
	changeGrace = 30 * time.Second
	// cursorMaxAge is the oldest cursor a client may resume from: the
	// changes after an older one may have been swept.
	cursorMaxAge = ChangeRetention - time.Hour
	// changesPerQuery bounds one poll's answer; more rows take another
	// statement at once.
	changesPerQuery = 2000
	// changeMaxGaps bounds the gaps one poll asks about again; beyond, the
	// oldest are given up early (and logged).
	changeMaxGaps = 1000
	// changeRecent is how many of the latest changes the poller keeps, so
	// that a client resuming from a recent cursor catches up from memory.
	changeRecent = 20000
	// changeQueue bounds the changes waiting for one slow client; beyond
	// it the client reads them from the store (once) instead.
	changeQueue = 4096
)

// RunChange is one row of the change log, with what the feed tells of its
// run as it is now.
type RunChange struct {
	ID            int64      `db:"id"`
	RunID         int64      `db:"run_id"`
	Change        ChangeKind `db:"change_kind"`
	Status        Status     `db:"status"` // as the step left it
	Decision      string     `db:"decision"`
	DecidedBy     string     `db:"decided_by"` // the decider's name
	OwnerID       int64      `db:"owner_id"`
	Configuration string     `db:"configuration"` // its identifier
	Title         string     `db:"title"`         // opened by the feed
	Turn          int        `db:"turn"`          // the conversation's
	Erased        bool       `db:"erased"`
}

// IDRange is the ids from Lo to Hi, both included.
type IDRange struct{ Lo, Hi int64 }

// ChangeQuery asks for the change log's rows above After or inside Gaps.
type ChangeQuery struct {
	After int64
	Gaps  []IDRange
	Limit int
}

// ChangeStore is what the change feed needs of the store.
type ChangeStore interface {
	// Changes reads, in one statement, the rows of q in id order.
	Changes(ctx context.Context, q ChangeQuery) ([]RunChange, error)
	// ChangesSettled is the highest id of the rows older than grace, 0
	// when there is none.
	ChangesSettled(ctx context.Context, grace time.Duration) (int64, error)
}

// FeedCursor is a position in the change log: every change at or below
// Pos was handed over (or given up on) as of At.
type FeedCursor struct {
	Pos int64
	At  time.Time
}

// String is the cursor as clients hold it: "<pos>-<unix seconds>".
func (c FeedCursor) String() string {
	return strconv.FormatInt(c.Pos, 10) + "-" + strconv.FormatInt(c.At.Unix(), 10)
}

// ParseFeedCursor reads a cursor of String's. A Refusal with
// CodeInvalidRequest for anything else, with CodeCursorExpired for one
// older than the log keeps its changes.
func ParseFeedCursor(s string, now time.Time) (FeedCursor, error) {
	p, t, ok := strings.Cut(s, "-")
	pos, err1 := strconv.ParseInt(p, 10, 64)
	at, err2 := strconv.ParseInt(t, 10, 64)
	if !ok || err1 != nil || err2 != nil || pos < 0 {
		return FeedCursor{}, &Refusal{Code: CodeInvalidRequest,
			Message: "after must be a cursor of the feed's own lines, as in {\"cursor\":\"…\"}"}
	}
	c := FeedCursor{Pos: pos, At: time.Unix(at, 0)}
	if c.At.Before(now.Add(-cursorMaxAge)) {
		return FeedCursor{}, &Refusal{Code: CodeCursorExpired,
			Message: fmt.Sprintf("the cursor is older than the feed keeps its changes (%s): read the runs afresh and attach without after", cursorMaxAge)}
	}
	return c, nil
}

// FeedLine is one change handed to a client, with the cursor to resume
// from once the client has it.
type FeedLine struct {
	Change RunChange
	Cursor FeedCursor
}

// changeFeed is an engine's change feed: its clients and the poller.
type changeFeed struct {
	e *Engine

	mu      sync.Mutex
	subs    map[*ChangeWatch]struct{}
	running bool
	known   bool // high, floor, gaps and recent say where the log stands
	primed  bool // and the first poll from there was read
	high    int64
	floor   int64
	gaps    []changeGap
	// recent holds every change read with an id above recentFrom, in the
	// order read.
	recent     []RunChange
	recentFrom int64
	polled     time.Time // the last poll that answered
	failing    time.Time
	// gaveUp is when gaps were last given up early: said at most once a
	// minute, since on a busy Galera cluster (its nodes' interleaved ids)
	// it may happen at every poll.
	gaveUp time.Time

	// queries counts the statements the poller sent, for tests and the
	// load test.
	queries atomic.Int64
}

// changeGap is ids skipped, still waited for since since.
type changeGap struct {
	IDRange
	since time.Time
}

func newChangeFeed(e *Engine) *changeFeed {
	return &changeFeed{e: e, subs: map[*ChangeWatch]struct{}{}}
}

func (f *changeFeed) query(ctx context.Context, q ChangeQuery) ([]RunChange, error) {
	f.queries.Add(1)
	cs, err := f.e.store.Changes(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("runtime: read the change log: %w", err)
	}
	for i := range cs {
		c := &cs[i]
		if c.Title, err = f.e.openText(c.Title, RunPlace("title", c.RunID)); err != nil {
			c.Title = unreadable(err)
		}
	}
	return cs, nil
}

// pollOnce reads the log once for every client: first where it stands
// (the rows older than changeGrace are taken as read), then what came
// after and what was skipped. It returns -1 when nobody listens (the
// poller has stopped, and forgets where the log stood), 1 when it should
// poll again at once, else 0.
func (f *changeFeed) pollOnce() int {
	f.mu.Lock()
	if len(f.subs) == 0 {
		f.running, f.known, f.primed = false, false, false
		f.gaps, f.recent = nil, nil
		f.mu.Unlock()
		return -1
	}
	known := f.known
	q := ChangeQuery{After: f.high, Limit: changesPerQuery}
	for _, g := range f.gaps {
		q.Gaps = append(q.Gaps, g.IDRange)
	}
	f.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), followQueryTimeout)
	defer cancel()
	if !known {
		f.queries.Add(1)
		pos, err := f.e.store.ChangesSettled(ctx, changeGrace)
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.failedLocked(err) {
			return 0
		}
		f.known, f.high, f.floor, f.recentFrom, f.polled = true, pos, pos, pos, time.Now()
		return 1
	}
	cs, err := f.query(ctx, q)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failedLocked(err) {
		return 0
	}
	f.readLocked(cs, time.Now())
	if !f.primed {
		f.primed = true
		for w := range f.subs {
			w.notify()
		}
	}
	if len(cs) == changesPerQuery {
		return 1
	}
	return 0
}

// failedLocked reports whether a poll failed, and once polls have failed
// for followGiveUp tells every client so. f.mu is held.
func (f *changeFeed) failedLocked(err error) bool {
	if err == nil {
		f.failing = time.Time{}
		return false
	}
	if f.failing.IsZero() {
		f.failing = time.Now()
	}
	f.e.log.Warn("change feed: poll failed", "err", err)
	if time.Since(f.failing) >= followGiveUp {
		for w := range f.subs {
			w.mu.Lock()
			w.failed = fmt.Errorf("%w: %w", ErrFollowUnavailable, err)
			w.mu.Unlock()
			w.notify()
		}
	}
	return true
}

// readLocked takes one poll's rows (in id order): it moves high, opens
// gaps for the ids skipped and closes those it read, gives up gaps older
// than changeGrace, and hands the rows to every client set up. f.mu is
// held.
func (f *changeFeed) readLocked(cs []RunChange, now time.Time) {
	for _, c := range cs {
		if c.ID > f.high {
			if c.ID > f.high+1 {
				f.gaps = append(f.gaps, changeGap{IDRange{f.high + 1, c.ID - 1}, now})
			}
			f.high = c.ID
			continue
		}
		for i, g := range f.gaps {
			if c.ID < g.Lo || c.ID > g.Hi {
				continue
			}
			var split []changeGap
			if c.ID > g.Lo {
				split = append(split, changeGap{IDRange{g.Lo, c.ID - 1}, g.since})
			}
			if c.ID < g.Hi {
				split = append(split, changeGap{IDRange{c.ID + 1, g.Hi}, g.since})
			}
			f.gaps = slices.Replace(f.gaps, i, i+1, split...)
			break
		}
	}
	kept := f.gaps[:0]
	for _, g := range f.gaps {
		if now.Sub(g.since) < changeGrace {
			kept = append(kept, g)
		}
	}
	if n := len(kept) - changeMaxGaps; n > 0 {
		if now.Sub(f.gaveUp) >= time.Minute {
			f.e.log.Warn("change feed: too many ids skipped at once; the oldest are given up early", "gaps", len(kept))
			f.gaveUp = now
		}
		kept = kept[n:]
	}
	f.gaps = kept
	f.floor = f.high
	if len(f.gaps) > 0 {
		f.floor = f.gaps[0].Lo - 1
	}
	f.polled = now

	f.recent = append(f.recent, cs...)
	if n := len(f.recent) - changeRecent; n > 0 {
		for _, c := range f.recent[:n] {
			f.recentFrom = max(f.recentFrom, c.ID)
		}
		f.recent = slices.Delete(f.recent, 0, n)
	}
	if len(cs) == 0 {
		return
	}
	lines := linesOf(cs, FeedCursor{Pos: f.floor, At: now})
	for w := range f.subs {
		if w.ready {
			w.handLocked(lines)
		}
	}
}
