package runtime

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"
)

// Lease names one held claim: the run and its holder.
type Lease struct {
	RunID     int64  `db:"id"`
	ClaimedBy string `db:"claimed_by"`
}

// cancelPoll is how often a process that holds runs asks whether someone
// asked, through another process, to cancel one of them: a cancel stops a
// held run within about this long plus a step's commit, at one indexed
// query per poll for the whole process (Store.CancelsRequested), and none
// while it holds nothing.
const cancelPoll = 250 * time.Millisecond

// leaseKeeper renews the leases of every continuation an engine holds, on
// one goroutine, and stops the calls of those whose run someone cancelled.
// A step's commit renews its own lease; the keeper covers the long steps
// in between (a slow tool, a slow model). One timer and one UPDATE per
// batch of runs, rather than a goroutine and an UPDATE per held run, is
// what lets a server hold 10,000 silent continuations on a short lease:
// they cost a few statements every lease/3, not 1,000 a second; and one
// read every cancelPoll finds the cancels among them.
type leaseKeeper struct {
	store Store
	lease time.Duration
	log   *slog.Logger
	// credentials slides the held runs' credentials on the same timer.
	credentials CredentialStore

	mu      sync.Mutex
	held    map[int64]*Continuation // by run id
	running bool                    // the loop runs; it stops when nothing is held
}

// hold starts renewing c's lease.
func (k *leaseKeeper) hold(c *Continuation) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held == nil {
		k.held = map[int64]*Continuation{}
	}
	k.held[c.run.ID] = c
	if !k.running {
		k.running = true
		go k.loop()
	}
}

// release stops renewing c's lease.
func (k *leaseKeeper) release(c *Continuation) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held[c.run.ID] == c {
		delete(k.held, c.run.ID)
	}
}

// halt stops the calls of the continuation that holds runID in this
// process, if one does: its run was cancelled. It reports whether one did.
func (k *leaseKeeper) halt(runID int64) bool {
	k.mu.Lock()
	c := k.held[runID]
	k.mu.Unlock()
	if c != nil {
		c.halt()
	}
	return c != nil
}

// loop renews every held lease every third of a lease, so that a lease
// outlives two missed renewals, and looks for cancel requests every poll.
// It ends when nothing is held: an idle engine keeps no goroutine for it
// and sends no query.
func (k *leaseKeeper) loop() {
	renewals := time.NewTicker(k.lease / 3)
	defer renewals.Stop()
	polls := time.NewTicker(cancelPoll)
	defer polls.Stop()
	for {
		var renew bool
		select {
		case <-renewals.C:
			renew = true
		case <-polls.C:
		}
		k.mu.Lock()
		if len(k.held) == 0 {
			k.running = false
			k.mu.Unlock()
			return
		}
		var held map[int64]*Continuation
		if renew {
			held = maps.Clone(k.held)
		}
		k.mu.Unlock()
		if renew {
			k.renew(held)
		} else {
			k.cancels()
		}
	}
}

// cancels halts the held continuations whose run someone asked to cancel
// through another process (a cancel through this one halts at once). It
// asks for every flagged running run, not for the held ones by id: the
// flagged are few and indexed, the held may be thousands.
func (k *leaseKeeper) cancels() {
	ctx, cancel := context.WithTimeout(context.Background(), k.lease/3)
	defer cancel()
	flagged, err := k.store.CancelsRequested(ctx)
	if err != nil {
		k.log.Warn("looking for cancel requests failed", "err", err)
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, l := range flagged {
		if c := k.held[l.RunID]; c != nil && c.run.ClaimedBy == l.ClaimedBy {
			c.halt()
		}
	}
}

// renew extends the leases of held and stops the continuations whose run
// someone else holds now: they must not record another step.
func (k *leaseKeeper) renew(held map[int64]*Continuation) {
	ctx, cancel := context.WithTimeout(context.Background(), k.lease/3)
	defer cancel()
	leases := make([]Lease, 0, len(held))
	for id, c := range held {
		leases = append(leases, Lease{RunID: id, ClaimedBy: c.run.ClaimedBy})
	}
	lost, err := k.store.RenewLeases(ctx, leases, k.lease)
	if err != nil {
		k.log.Warn("lease renewal failed", "runs", len(leases), "err", err)
	}
	for _, id := range lost {
		held[id].lost.Store(true)
	}
	if err := slideCredentials(ctx, k.credentials, held); err != nil {
		k.log.Warn("run credential slide failed", "err", err)
	}
}
