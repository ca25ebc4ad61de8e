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

// TestLoginGuardThrottles: a key's first failures go free; from the
// throttle's count on, each failure doubles the wait before the next
// attempt, up to the throttle's maximum, and the wait ends on its own. A window without failures forgets them; a success
// forgets them at once.
func TestLoginGuardThrottles(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	g := newLoginGuard()
	g.now = func() time.Time { return now }
	th := throttle{free: 2, max: 4 * time.Second}
	fail := func() { g.failed(map[string]throttle{"k": th}) }

	fail()
	if w := g.retryAfter("k"); w != 0 {
		t.Fatalf("after a free failure: wait %s, want none", w)
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		fail()
		if w := g.retryAfter("k", "other"); w != want {
			t.Errorf("failure %d: wait %s, want %s", i+2, w, want)
		}
	}
	now = now.Add(4 * time.Second)
	if w := g.retryAfter("k"); w != 0 {
		t.Errorf("after the wait: wait %s, want none", w)
	}
	now = now.Add(failureWindow + time.Second)
	fail()
	if w := g.retryAfter("k"); w != 0 {
		t.Errorf("a failure after a quiet window: wait %s, want none (counted anew)", w)
	}
	fail()
	fail()
	g.succeeded("k")
	if w := g.retryAfter("k"); w != 0 {
		t.Errorf("after a success: wait %s, want none", w)
	}
}

// TestLoginGuardForgetsTheOldestBeyondItsBound: a flood of distinct names
// cannot grow the guard's memory past maxTracked keys.
func TestLoginGuardForgetsTheOldestBeyondItsBound(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	g := newLoginGuard()
	g.now = func() time.Time { return now }
	for i := range maxTracked + 50 {
		now = now.Add(time.Millisecond)
		g.failed(map[string]throttle{fmt.Sprintf("name:%d", i): nameThrottle})
	}
	if n := len(g.failures); n != maxTracked {
		t.Errorf("%d keys tracked, want %d", n, maxTracked)
	}
	if _, ok := g.failures["name:0"]; ok {
		t.Error("the oldest key is still tracked")
	}
	if _, ok := g.failures[fmt.Sprintf("name:%d", maxTracked+49)]; !ok {
		t.Error("the newest key is not tracked")
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
			now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
			g := newLoginGuard()
			g.now = func() time.Time { return now }
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
	if wait := g.retryAfter(nameKey(name), addrKey(addr)); wait > 0 {
		return nil, wait
	}
	return func() { g.failed(map[string]throttle{nameKey(name): nameThrottle, addrKey(addr): addrThrottle}) }, 0
}
