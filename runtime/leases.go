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
	RunID     int64
	ClaimedBy string
}

// leaseKeeper renews the leases of every continuation an engine holds, on
// one timer. A step's commit renews its own lease; the keeper covers the
// long steps in between (a slow tool, a slow model). One timer and one
// UPDATE per batch of runs, rather than a goroutine and an UPDATE per held
// run, is what lets a server hold 10,000 silent continuations on a short
// lease: they cost a few statements every lease/3, not 1,000 a second.
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

// loop renews every held lease every third of a lease, so that a lease
// outlives two missed renewals. It ends when nothing is held: an idle
// engine keeps no goroutine for it.
func (k *leaseKeeper) loop() {
	t := time.NewTicker(k.lease / 3)
	defer t.Stop()
	for range t.C {
		k.mu.Lock()
		if len(k.held) == 0 {
			k.running = false
			k.mu.Unlock()
			return
		}
		held := maps.Clone(k.held)
		k.mu.Unlock()
		k.renew(held)
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
