package web

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alexedwards/argon2id"
)

// TestLoginGuardBoundsChecks: however many attempts arrive at once, at
// most maxPasswordChecks hold a check; the others wait up to the guard's
// wait and are then turned away, and every check taken is given back.
func TestLoginGuardBoundsChecks(t *testing.T) {
	g := newLoginGuard()
	g.wait = 50 * time.Millisecond
	var inside, most atomic.Int64
	var refused atomic.Int64
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 60 {
		wg.Go(func() {
			done, ok := g.acquire(context.Background())
			if !ok {
				refused.Add(1)
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			inside.Add(-1)
			done()
		})
	}
	// The four that got in hold their checks until the rest gave up.
	deadline := time.Now().Add(10 * time.Second)
	for refused.Load() < 60-maxPasswordChecks {
		if time.Now().After(deadline) {
			t.Fatalf("%d refused, want %d", refused.Load(), 60-maxPasswordChecks)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	if m := most.Load(); m != maxPasswordChecks {
		t.Errorf("at most %d checks ran at once, want %d", m, maxPasswordChecks)
	}
	if n := len(g.checks); n != 0 {
		t.Errorf("%d checks still held after every attempt ended", n)
	}
}

// fixedClock is a guard whose clock moves only when the test moves it.
func fixedClock() (*loginGuard, *time.Time) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	g := newLoginGuard()
	g.now = func() time.Time { return now }
	return g, &now
}

// fail makes one attempt at name from addr and records it as a wrong
// password; it fails the test when the attempt is refused.
func fail(t *testing.T, g *loginGuard, name, addr string) {
	t.Helper()
	try, wait := g.begin(name, addr)
	if try == nil {
		t.Fatalf("%s from %s: refused for %s, want an attempt", name, addr, wait)
	}
	try.failed()
}

// TestLoginGuardThrottles: a name's first failures go free; from the
// throttle's count on, each failure doubles the wait before the next
// attempt, up to the throttle's maximum, and the wait ends on its own. A
// window without failures forgets them; a success forgets the name's at
// once, and an address's stay.
func TestLoginGuardThrottles(t *testing.T) {
	g, now := fixedClock()
	wait := func() time.Duration {
		t.Helper()
		try, wait := g.begin("owner", "192.0.2.1")
		if try != nil {
			try.abandon()
		}
		return wait
	}
	for range nameThrottle.free - 1 {
		fail(t, g, "owner", "192.0.2.1")
	}
	if w := wait(); w != 0 {
		t.Fatalf("after the free failures but one: wait %s, want none", w)
	}
	want := time.Second
	for i := range 12 {
		fail(t, g, "owner", "192.0.2.1")
		if w := wait(); w != want {
			t.Errorf("failure %d: wait %s, want %s", nameThrottle.free+i, w, want)
		}
		*now = now.Add(want)
		want = min(2*want, nameThrottle.max)
	}
	if want != 5*time.Minute {
		t.Errorf("the wait grew to %s, want 5m", want)
	}
	if w := wait(); w != 0 {
		t.Errorf("after the wait: wait %s, want none", w)
	}
	*now = now.Add(failureWindow + time.Second)
	fail(t, g, "owner", "192.0.2.1")
	if w := wait(); w != 0 {
		t.Errorf("a failure after a quiet window: wait %s, want none (counted anew)", w)
	}
	for i := range addrThrottle.free - 2 {
		fail(t, g, fmt.Sprintf("guess%d", i), "192.0.2.1")
	}
	try, _ := g.begin("owner", "192.0.2.1")
	try.succeeded()
	if w := wait(); w != 0 {
		t.Errorf("after a success: wait %s, want none", w)
	}
	if f := g.failures[addrKey("192.0.2.1")]; f == nil || f.failed != addrThrottle.free-1 || f.pending != 0 {
		t.Errorf("the address's failures after a success: %+v, want %d failed and none pending", f, addrThrottle.free-1)
	}
	for _, k := range []string{nameKey("owner"), pairKey("owner", "192.0.2.1")} {
		if f := g.failures[k]; f != nil {
			t.Errorf("%s after a success: %+v, want forgotten", k, f)
		}
	}
}

// TestLoginGuardForgetsTheOldestBeyondItsBound: a flood of distinct names
// and addresses cannot grow the guard's memory past maxTracked records.
func TestLoginGuardForgetsTheOldestBeyondItsBound(t *testing.T) {
	g, now := fixedClock()
	addr := func(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }
	n := maxTracked/3 + 50
	for i := range n {
		*now = now.Add(time.Millisecond)
		fail(t, g, fmt.Sprintf("n%d", i), addr(i))
	}
	if got := len(g.failures); got > maxTracked {
		t.Errorf("%d records kept, want at most %d", got, maxTracked)
	}
	if _, ok := g.failures[nameKey("n0")]; ok {
		t.Error("the oldest name is still tracked")
	}
	last := n - 1
	for _, k := range []string{nameKey(fmt.Sprintf("n%d", last)), addrKey(addr(last)), pairKey(fmt.Sprintf("n%d", last), addr(last))} {
		if _, ok := g.failures[k]; !ok {
			t.Errorf("the newest %s is not tracked", k)
		}
	}
}

// TestLoginGuardHoldsUpOnlyAddressesThatFailedForTheName: fifty failures
// for a name from fifty addresses hold up each of those addresses for the
// name's delay, not an address that has not failed for the name. An
// address that failed once waits the delay from its own failure however
// long others go on failing, and a success then forgets the name's
// failures.
func TestLoginGuardHoldsUpOnlyAddressesThatFailedForTheName(t *testing.T) {
	g, now := fixedClock()
	for i := range 50 {
		fail(t, g, "owner", fmt.Sprintf("198.51.100.%d", i+1))
	}
	if try, wait := g.begin("owner", "198.51.100.7"); try != nil || wait != nameThrottle.max {
		t.Errorf("an address that failed for the name: attempt %v, wait %s; want it held up for %s", try != nil, wait, nameThrottle.max)
	}
	try, wait := g.begin("owner", "203.0.113.77")
	if try == nil {
		t.Fatalf("an address that has not failed for the name: held up for %s", wait)
	}
	if try.gate == nil {
		t.Error("an attempt at a held-up name does not go through its gate")
	}
	try.failed() // the owner's typo
	for i := range 4 {
		*now = now.Add(time.Minute)
		fail(t, g, "owner", fmt.Sprintf("198.51.101.%d", i+1))
	}
	if try, wait := g.begin("owner", "203.0.113.77"); try != nil || wait != time.Minute {
		t.Errorf("four minutes after its failure, while others failed since: attempt %v, wait %s; want a minute more", try != nil, wait)
	}
	*now = now.Add(time.Minute)
	try, wait = g.begin("owner", "203.0.113.77")
	if try == nil {
		t.Fatalf("five minutes after its failure: held up for %s", wait)
	}
	release, ok := try.turn(context.Background())
	if !ok {
		t.Fatal("no turn for the owner")
	}
	release()
	try.succeeded()
	for _, k := range []string{nameKey("owner"), pairKey("owner", "203.0.113.77")} {
		if f := g.failures[k]; f != nil {
			t.Errorf("%s after the owner's success: %+v, want forgotten", k, f)
		}
	}
	if len(g.gates) != 0 {
		t.Errorf("%d gates left", len(g.gates))
	}
}

// TestLoginGuardTakesFreshAddressesOneAtATime: while a name is held up,
// sixty attempts at it from sixty addresses that never failed for it are
// each let in, but only one at a time gets its turn at a check: the others
// wait their turn and, beyond the guard's wait, are turned away without a
// check and without counting.
func TestLoginGuardTakesFreshAddressesOneAtATime(t *testing.T) {
	g, _ := fixedClock()
	g.wait = 50 * time.Millisecond
	for range nameThrottle.free {
		fail(t, g, "owner", "192.0.2.1")
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var inside, most, refused, checked atomic.Int64
	release := make(chan struct{})
	for i := range 60 {
		addr := fmt.Sprintf("198.51.100.%d", i+1)
		wg.Go(func() {
			<-start
			try, wait := g.begin("owner", addr)
			if try == nil {
				t.Errorf("%s: held up for %s, want let in", addr, wait)
				return
			}
			done, ok := try.turn(context.Background())
			if !ok {
				refused.Add(1)
				try.abandon()
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-release
			inside.Add(-1)
			done()
			checked.Add(1)
			try.failed()
		})
	}
	close(start)
	// The one inside holds its turn until the rest gave up.
	deadline := time.Now().Add(10 * time.Second)
	for refused.Load() < 59 {
		if time.Now().After(deadline) {
			t.Fatalf("%d turned away, want 59", refused.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	if m, c := most.Load(), checked.Load(); m != 1 || c != 1 {
		t.Errorf("%d fresh addresses had their turn at once, %d in all; want 1 and 1", m, c)
	}
	if f := g.failures[nameKey("owner")]; f == nil || f.failed != nameThrottle.free+1 || f.pending != 0 {
		t.Errorf("the name's record: %+v, want %d failed (the turned-away ones not counted), none pending", f, nameThrottle.free+1)
	}
	if len(g.gates) != 0 || len(g.checks) != 0 {
		t.Errorf("%d gates and %d checks still held", len(g.gates), len(g.checks))
	}
}

// TestPasswordHashes: new hashes use passwordParams; a hash made with
// other parameters (argon2id's defaults, 64 MiB) still verifies and is
// reported stale, so sign-in makes it again.
func TestPasswordHashes(t *testing.T) {
	h, err := HashPassword("secret")
	if err != nil {
		t.Fatal(err)
	}
	params, _, _, err := argon2id.DecodeHash(h)
	if err != nil || *params != *passwordParams {
		t.Fatalf("new hash params = %+v, %v; want %+v", params, err, passwordParams)
	}
	if ok, stale := checkPassword(h, "secret"); !ok || stale {
		t.Errorf("checkPassword(new hash) = %v, stale %v; want a match, not stale", ok, stale)
	}
	old, err := argon2id.CreateHash("secret", argon2id.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	if ok, stale := checkPassword(old, "secret"); !ok || !stale {
		t.Errorf("checkPassword(old hash) = %v, stale %v; want a match, stale", ok, stale)
	}
	for _, tt := range []struct{ hash, password string }{{h, "wrong"}, {"", ""}, {"", "no such user"}, {"garbage", "secret"}} {
		if ok, _ := checkPassword(tt.hash, tt.password); ok {
			t.Errorf("checkPassword(%q, %q) matched", tt.hash, tt.password)
		}
	}
}

// TestLoginGuardCountsAttemptsBeforeTheirCheck: sixty wrong passwords
// released together, each let through or refused before any of them was
// checked (the race a check-then-count guard loses): for one name from
// one address at most the name's free failures reach their check, and
// from one address with a name each at most the address's; every other
// attempt is told how long to wait.
func TestLoginGuardCountsAttemptsBeforeTheirCheck(t *testing.T) {
	tests := []struct {
		name string
		who  func(i int) (name, addr string)
		want int
	}{
		{"one name from one address", func(int) (string, string) { return "owner", "192.0.2.1" }, nameThrottle.free},
		{"one address, a name each", func(i int) (string, string) { return fmt.Sprintf("guess%d", i), "192.0.2.1" }, addrThrottle.free},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := fixedClock()
			start, checking := make(chan struct{}), make(chan struct{})
			var decided, wg sync.WaitGroup
			var checked, refused atomic.Int64
			decided.Add(60)
			for i := range 60 {
				name, addr := tt.who(i)
				wg.Go(func() {
					<-start
					try, wait := tryWrongPassword(g, name, addr)
					decided.Done()
					if try == nil {
						if wait <= 0 {
							t.Errorf("attempt %d refused without a wait", i)
						}
						refused.Add(1)
						return
					}
					checked.Add(1)
					<-checking // every attempt has been let through or refused
					try()
				})
			}
			close(start)
			decided.Wait()
			close(checking)
			wg.Wait()
			if got := checked.Load(); got != int64(tt.want) || refused.Load() != int64(60-tt.want) {
				t.Errorf("%d checked, %d refused; want %d checked, the other %d refused", got, refused.Load(), tt.want, 60-tt.want)
			}
		})
	}
}

// tryWrongPassword starts an attempt: nil and the wait when it is
// refused, else the function that records its wrong password.
func tryWrongPassword(g *loginGuard, name, addr string) (fail func(), wait time.Duration) {
	try, wait := g.begin(name, addr)
	if try == nil {
		return nil, wait
	}
	return try.failed, 0
}
