package web

import (
	"context"
	"sync"
	"time"
)

// Sign-in is bounded so that no flood of attempts costs the server more
// than a few password checks' memory, no name or address can be guessed at
// speed, and yet failures made elsewhere never hold up a name's owner:
//
//   - at most maxPasswordChecks argon2id checks run at once in the
//     process; an attempt waits up to checkWait for one, then is told 503
//     with Retry-After;
//   - every attempt is counted as a failure before its check and stays
//     counted unless the password turns out right (or it is never checked),
//     so attempts made in parallel see one another: of 60 wrong passwords
//     posted at once for one name from one address, 5 are checked;
//   - failures are counted three ways: per name from anywhere, per client
//     address whatever the name, and per (name, address) pair. After
//     nameThrottle.free failures of a pair and after addrThrottle.free of an
//     address, each further attempt must wait a delay that doubles with
//     every failure (1 s, 2 s, … up to 5 min); an attempt before then is
//     429 with Retry-After and checks no password;
//   - the name-wide count holds up no address that has not failed for the
//     name, so that someone guessing from elsewhere cannot lock its owner
//     out. Once it reaches nameThrottle.free, the name is held up for the
//     delay of its count (from its latest attempt, as above): an address
//     that has failed for the name (or has an attempt at it in flight)
//     must wait that delay from its own latest attempt at the name — a
//     typo of the owner's costs at most 5 minutes, however long others go
//     on guessing — and every attempt at a held-up name, a fresh address's
//     included, passes the name's gate one at a time, waiting its turn
//     within checkWait as for a check. An attacker spreading over many
//     addresses thus makes one guess at a time at the name, and one per
//     address per delay (up to 5 minutes each);
//   - failures are forgotten after failureWindow without one; a right
//     password forgets its name's and its pair's at once, and leaves its
//     address's as they were;
//   - before anyone signs in, no session is stored: the sign-in form's CSRF
//     token is a cookie of its own (double submit), and the session starts
//     with the successful POST.

const (
	// maxPasswordChecks is how many password checks run at once.
	maxPasswordChecks = 4
	// checkWait is how long an attempt waits for its turn at a check.
	checkWait = 2 * time.Second
	// failureWindow: failures are forgotten after this long without a new
	// one.
	failureWindow = 15 * time.Minute
	// maxTracked bounds the names, addresses and pairs whose failures are
	// kept; beyond it the oldest are forgotten first.
	maxTracked = 10000
)

// throttle says after how many failures of one kind the next attempt must
// wait, and how long that wait may grow.
type throttle struct {
	free int
	max  time.Duration
}

// delay is how long the next attempt waits after n failures: none while n
// is under the free ones, then 1 s doubling up to th.max.
func (th throttle) delay(n int) time.Duration {
	over := n - th.free
	switch {
	case over < 0:
		return 0
	case over >= 30:
		return th.max
	}
	return min(time.Duration(1<<over)*time.Second, th.max)
}

var (
	// nameThrottle is a name's, from anywhere, and a (name, address)
	// pair's.
	nameThrottle = throttle{free: 5, max: 5 * time.Minute}
	// Many people may share an address (an office, a proxy without
	// --trusted-proxies), so an address gets more failures free.
	addrThrottle = throttle{free: 20, max: 5 * time.Minute}
)

// loginGuard bounds sign-in attempts; see the top of this file. It is safe
// for concurrent use.
type loginGuard struct {
	checks chan struct{}
	wait   time.Duration
	now    func() time.Time

	mu       sync.Mutex
	failures map[string]*failures
	gates    map[string]*nameGate // by name, while an attempt at it since it was held up is in flight
}

// failures are one key's failed attempts, those still in flight included.
type failures struct {
	th              throttle
	failed, pending int
	failedAt        time.Time // the latest failure: the window runs from it
	last            time.Time // the latest attempt begun or failed: the delay runs from it
	until           time.Time // no attempt before this
}

// setUntil sets until from the count and the latest attempt.
func (f *failures) setUntil() {
	f.until = time.Time{}
	if d := f.th.delay(f.failed + f.pending); d > 0 {
		f.until = f.last.Add(d)
	}
}

// wait is how long until the key may be tried again; 0 for no record.
func (f *failures) wait(now time.Time) time.Duration {
	if f == nil || !now.Before(f.until) {
		return 0
	}
	return f.until.Sub(now)
}

// nameGate lets one check for a held-up name through at a time.
type nameGate struct {
	turn  chan struct{}
	users int // attempts that may take turn; the gate is dropped at 0
}

func newLoginGuard() *loginGuard {
	return &loginGuard{checks: make(chan struct{}, maxPasswordChecks), wait: checkWait, now: time.Now,
		failures: map[string]*failures{}, gates: map[string]*nameGate{}}
}

func nameKey(name string) string       { return "name:" + name }
func addrKey(addr string) string       { return "addr:" + addr }
func pairKey(name, addr string) string { return "pair:" + addr + " " + name } // an address has no space

// attempt is one sign-in attempt, counted as a failure of its name, its
// pair and its address from begin on. Exactly one of failed, succeeded and
// abandon settles it; the others are then no-ops, so a deferred abandon
// settles whatever returned early.
type attempt struct {
	g       *loginGuard
	name    string
	keys    [3]string // name, pair, address
	recs    [3]*failures
	gate    *nameGate // nil unless the name was held up when the attempt began
	settled bool
}

// begin counts an attempt at name from addr, or returns nil and how long
// to wait when one of its keys is held up.
func (g *loginGuard) begin(name, addr string) (*attempt, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	a := &attempt{g: g, name: name, keys: [3]string{nameKey(name), pairKey(name, addr), addrKey(addr)}}
	for i, k := range a.keys {
		a.recs[i] = g.live(k, now)
	}
	named, pair, address := a.recs[0], a.recs[1], a.recs[2]
	wait := max(pair.wait(now), address.wait(now))
	heldUp := named.wait(now) > 0
	if heldUp && pair != nil {
		// This address has failed for the name: the name's delay, from its
		// own latest attempt at it.
		if until := pair.last.Add(nameThrottle.delay(named.failed + named.pending)); now.Before(until) {
			wait = max(wait, until.Sub(now))
		}
	}
	if wait > 0 {
		return nil, wait
	}
	// Existing records first, so that making the missing ones cannot
	// forget them: forgetOldest spares records with attempts in flight.
	for _, f := range a.recs {
		if f != nil {
			f.pending++
		}
	}
	for i, th := range [3]throttle{nameThrottle, nameThrottle, addrThrottle} {
		if a.recs[i] == nil {
			a.recs[i] = g.track(a.keys[i], th, now)
			a.recs[i].pending++
		}
		a.recs[i].last = now
		a.recs[i].setUntil()
	}
	if heldUp {
		gate := g.gates[name]
		if gate == nil {
			gate = &nameGate{turn: make(chan struct{}, 1)}
			g.gates[name] = gate
		}
		gate.users++
		a.gate = gate
	}
	return a, 0
}

// live is the key's record, nil when there is none or it expired (then it
// is dropped). g.mu is held.
func (g *loginGuard) live(key string, now time.Time) *failures {
	f := g.failures[key]
	if f != nil && f.pending == 0 && now.Sub(f.failedAt) > failureWindow {
		delete(g.failures, key)
		return nil
	}
	return f
}

// track makes a key's record, forgetting others first when maxTracked are
// kept. g.mu is held.
func (g *loginGuard) track(key string, th throttle, now time.Time) *failures {
	if len(g.failures) >= maxTracked {
		g.forgetOldest(now)
	}
	f := &failures{th: th}
	g.failures[key] = f
	return f
}

// forgetOldest drops the records that expired, or else the one whose last
// failure is oldest — never one with attempts in flight, which would then
// go uncounted (so with more attempts in flight than maxTracked records,
// the map grows by them). g.mu is held.
func (g *loginGuard) forgetOldest(now time.Time) {
	oldest, at := "", now
	for k, f := range g.failures {
		switch {
		case f.pending > 0:
		case now.Sub(f.failedAt) > failureWindow:
			delete(g.failures, k)
		case !f.failedAt.After(at):
			oldest, at = k, f.failedAt
		}
	}
	if len(g.failures) >= maxTracked && oldest != "" {
		delete(g.failures, oldest)
	}
}

// turn waits up to g.wait for the attempt's turn at a password check: the
// name's gate first when it goes through one, then one of the process's
// checks. release gives both back; false when they did not come free in
// time.
func (a *attempt) turn(ctx context.Context) (release func(), ok bool) {
	t := time.NewTimer(a.g.wait)
	defer t.Stop()
	if a.gate != nil {
		select {
		case a.gate.turn <- struct{}{}:
		case <-t.C:
			return nil, false
		case <-ctx.Done():
			return nil, false
		}
	}
	done, ok := a.g.acquireBy(ctx, t.C)
	if !ok {
		if a.gate != nil {
			<-a.gate.turn
		}
		return nil, false
	}
	return func() {
		done()
		if a.gate != nil {
			<-a.gate.turn
		}
	}, true
}

// failed settles the attempt as a wrong name or password: it stays counted,
// from now.
func (a *attempt) failed() {
	a.settle(func(i int, f *failures, now time.Time) {
		f.failed++
		f.failedAt, f.last = now, now
	})
}

// succeeded settles the attempt as a right password: its name's and its
// pair's failures are forgotten; its address's are not, but the attempt no
// longer counts among them.
func (a *attempt) succeeded() {
	a.settle(func(i int, f *failures, _ time.Time) {
		if i < 2 {
			f.failed = 0
		}
	})
}

// abandon settles an attempt that was never checked (no check came free,
// the database failed): it no longer counts.
func (a *attempt) abandon() { a.settle(func(int, *failures, time.Time) {}) }

// settle takes the attempt out of every record's pending ones, applies how
// it ended, and drops what no longer holds anything.
func (a *attempt) settle(end func(i int, f *failures, now time.Time)) {
	g := a.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if a.settled {
		return
	}
	a.settled = true
	now := g.now()
	for i, f := range a.recs {
		f.pending--
		end(i, f, now)
		f.setUntil()
		if f.failed+f.pending == 0 && g.failures[a.keys[i]] == f {
			delete(g.failures, a.keys[i])
		}
	}
	if a.gate != nil {
		if a.gate.users--; a.gate.users == 0 && g.gates[a.name] == a.gate {
			delete(g.gates, a.name)
		}
	}
}

// acquire takes one of the password checks, waiting up to g.wait; release
// gives it back. false when none came free in time.
func (g *loginGuard) acquire(ctx context.Context) (release func(), ok bool) {
	t := time.NewTimer(g.wait)
	defer t.Stop()
	return g.acquireBy(ctx, t.C)
}

// acquireBy takes one of the password checks unless timeout fires or ctx
// ends first.
func (g *loginGuard) acquireBy(ctx context.Context, timeout <-chan time.Time) (release func(), ok bool) {
	select {
	case g.checks <- struct{}{}:
		return func() { <-g.checks }, true
	case <-timeout:
	case <-ctx.Done():
	}
	return nil, false
}
