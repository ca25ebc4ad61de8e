package web_test

import (
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/alexedwards/argon2id"

	"github.com/turnstile-dev/turnstile/web"
)

// signInAs posts the sign-in form from a fresh visitor with extra headers.
func (a *testApp) signInAs(t *testing.T, name, password string, header http.Header) (*http.Response, string) {
	t.Helper()
	c := a.visitor(t)
	c.get("/login")
	f := url.Values{"username": {name}, "password": {password}, "csrf_token": {c.csrf}}
	return c.raw("/login", f.Encode(), header)
}

// TestSignInSlowsRepeatedFailures: five wrong passwords for one name from
// one address go free; the sixth attempt must wait, with a 429 and
// Retry-After, whether the name exists or not, and even the right password
// is not checked until the wait is over. The name from an address that has
// not failed for it is checked (the owner is not locked out), and so is
// another name from another address; twenty failures from one address hold
// that address up whatever the name.
func TestSignInSlowsRepeatedFailures(t *testing.T) {
	a := newApp(t, 0, func(d *web.Deps) {
		d.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	from := func(addr string) http.Header { return http.Header{"X-Forwarded-For": {addr}} }
	for _, name := range []string{"owner", "nobody"} {
		addr := from("192.0.2.1")
		if name == "nobody" {
			addr = from("192.0.2.2")
		}
		for i := range 5 {
			if res, _ := a.signInAs(t, name, "wrong", addr); res.StatusCode != http.StatusUnauthorized {
				t.Fatalf("%s, failure %d: %d, want 401", name, i+1, res.StatusCode)
			}
		}
		res, body := a.signInAs(t, name, testPassword, addr)
		if res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%s, sixth attempt: %d, want 429", name, res.StatusCode)
		}
		if secs, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || secs < 1 || secs > 1 {
			t.Errorf("%s: Retry-After = %q, want 1 (second) after the first failure beyond the free ones", name, res.Header.Get("Retry-After"))
		}
		if !strings.Contains(body, "Too many failed sign-ins") || !strings.Contains(body, `value="`+name+`"`) {
			t.Errorf("%s: the 429 page does not say why or lost the name:\n%s", name, body)
		}
	}
	// The same name from an address that has not failed for it is
	// checked; another name is not held up either.
	if res, _ := a.signInAs(t, "owner", testPassword, from("198.51.100.7")); res.StatusCode != http.StatusSeeOther {
		t.Errorf("owner from an address that has not failed: %d, want 303 (signed in)", res.StatusCode)
	}
	if res, _ := a.signInAs(t, "admin", testPassword, from("198.51.100.7")); res.StatusCode != http.StatusSeeOther {
		t.Errorf("admin from another address: %d, want 303 (signed in)", res.StatusCode)
	}
	// One address, many names.
	for i := range 20 {
		if res, _ := a.signInAs(t, "guess"+strconv.Itoa(i), "wrong", from("203.0.113.9")); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d from one address: %d, want 401", i+1, res.StatusCode)
		}
	}
	if res, _ := a.signInAs(t, "approver", testPassword, from("203.0.113.9")); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("after 20 failures from one address: %d, want 429", res.StatusCode)
	}
	// X-Forwarded-For counts only from a trusted proxy: the test server's
	// peer is trusted here, so the address above is the client's.
	if res, _ := a.signInAs(t, "approver", testPassword, from("203.0.113.10")); res.StatusCode != http.StatusSeeOther {
		t.Errorf("another client behind the same proxy: %d, want 303", res.StatusCode)
	}
}

// TestSignInIgnoresForwardedForFromAnyone: without --trusted-proxies a
// client cannot choose its address by sending X-Forwarded-For.
func TestSignInIgnoresForwardedForFromAnyone(t *testing.T) {
	a := newApp(t, 0)
	for i := range 20 {
		h := http.Header{"X-Forwarded-For": {"192.0.2." + strconv.Itoa(i+1)}}
		if res, _ := a.signInAs(t, "guess"+strconv.Itoa(i), "wrong", h); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d, want 401", i+1, res.StatusCode)
		}
	}
	h := http.Header{"X-Forwarded-For": {"192.0.2.200"}}
	if res, _ := a.signInAs(t, "owner", testPassword, h); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("after 20 failures from one peer with varied X-Forwarded-For: %d, want 429", res.StatusCode)
	}
}

// TestSignInFloodIsTurnedAway: sixty wrong passwords at once, each for its
// own name, are answered 401 or, beyond the checks that may run at once,
// 503 with Retry-After — never anything else — and the server signs the
// right user in afterwards.
func TestSignInFloodIsTurnedAway(t *testing.T) {
	a := newApp(t, 0, func(d *web.Deps) {
		d.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for i := range 60 {
		c := a.visitor(t)
		c.get("/login")
		body := url.Values{"username": {"flood" + strconv.Itoa(i)}, "password": {"wrong"}, "csrf_token": {c.csrf}}.Encode()
		h := http.Header{"X-Forwarded-For": {"192.0.2." + strconv.Itoa(i+1)}}
		wg.Go(func() {
			res, _ := c.raw("/login", body, h)
			mu.Lock()
			defer mu.Unlock()
			got[res.StatusCode]++
			if res.StatusCode == http.StatusServiceUnavailable && res.Header.Get("Retry-After") == "" {
				t.Error("a 503 without Retry-After")
			}
		})
	}
	wg.Wait()
	if got[http.StatusUnauthorized]+got[http.StatusServiceUnavailable] != 60 || got[http.StatusUnauthorized] < 4 {
		t.Errorf("answers = %v, want only 401 (at least 4) and 503", got)
	}
	if res, _ := a.signInAs(t, "owner", testPassword, nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-in after the flood: %d, want 303", res.StatusCode)
	}
}

// TestSignInRehashesOldHashes: a password hashed with argon2id's defaults
// (64 MiB a check) still signs in, and is stored again with the server's
// own parameters.
func TestSignInRehashesOldHashes(t *testing.T) {
	a := newApp(t, 0)
	old, err := argon2id.CreateHash(testPassword, argon2id.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	id := a.Users["owner"].ID
	if err := a.Store.SetPassword(t.Context(), id, old); err != nil {
		t.Fatal(err)
	}
	if res, _ := a.signInAs(t, "owner", testPassword, nil); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in with an old hash: %d, want 303", res.StatusCode)
	}
	var stored string
	if err := a.DB.Get(&stored, `SELECT password_hash FROM users WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	params, _, _, err := argon2id.DecodeHash(stored)
	if err != nil || params.Memory != 19*1024 || params.Iterations != 2 || params.Parallelism != 1 {
		t.Errorf("stored hash after sign-in has params %+v (%v), want m=19456 t=2 p=1", params, err)
	}
	if res, _ := a.signInAs(t, "owner", testPassword, nil); res.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-in with the new hash: %d, want 303", res.StatusCode)
	}
}

// behindProxy is an app whose test client is a trusted proxy, so that
// X-Forwarded-For names each attempt's client.
func behindProxy(t *testing.T) *testApp {
	return newApp(t, 0, func(d *web.Deps) {
		d.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
}

func forwardedFor(addr string) http.Header { return http.Header{"X-Forwarded-For": {addr}} }

// parallelSignIns posts n sign-ins at the same instant, the i-th for
// who(i)'s name, password and client address, each from a visitor that
// fetched the form first, and counts the answers by status. Every 429 and
// 503 must say when to retry.
func (a *testApp) parallelSignIns(t *testing.T, n int, who func(i int) (name, password, addr string)) map[int]int {
	t.Helper()
	var mu sync.Mutex
	got := map[int]int{}
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		name, password, addr := who(i)
		c := a.visitor(t)
		c.get("/login")
		body := url.Values{"username": {name}, "password": {password}, "csrf_token": {c.csrf}}.Encode()
		wg.Go(func() {
			<-gate
			res, _ := c.raw("/login", body, forwardedFor(addr))
			mu.Lock()
			defer mu.Unlock()
			got[res.StatusCode]++
			if s := res.StatusCode; (s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable) && res.Header.Get("Retry-After") == "" {
				t.Errorf("a %d without Retry-After", s)
			}
		})
	}
	close(gate)
	wg.Wait()
	return got
}

// TestSignInCountsParallelAttemptsBeforeTheirCheck: sixty wrong passwords
// posted at once for one name from one address get at most the name's
// five free checks (401); from one address with a name each, at most the
// address's twenty. The others are 429 with Retry-After (or 503 when no
// check came free in time, which counts no failure), and none is anything
// else.
func TestSignInCountsParallelAttemptsBeforeTheirCheck(t *testing.T) {
	tests := []struct {
		name  string
		who   func(i int) (name, password, addr string)
		limit int
	}{
		{"one name from one address", func(int) (string, string, string) { return "owner", "wrong", "192.0.2.1" }, 5},
		{"one address, a name each", func(i int) (string, string, string) {
			return "guess" + strconv.Itoa(i), "wrong", "192.0.2.2"
		}, 20},
	}
	a := behindProxy(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := a.parallelSignIns(t, 60, tt.who)
			t.Logf("answers: %v", got)
			// A 503 was counted until no check came free in time, then no
			// longer: a later attempt may take its place.
			checked, refused, busy := got[http.StatusUnauthorized], got[http.StatusTooManyRequests], got[http.StatusServiceUnavailable]
			if checked < 1 || checked > tt.limit || checked+refused+busy != 60 || refused < 60-tt.limit-busy {
				t.Errorf("answers %v: want at most %d checked (401), the others 429 or 503, at least %d of them 429 less one a 503",
					got, tt.limit, 60-tt.limit)
			}
		})
	}
}

// TestSignInLetsTheOwnerInDespiteFailuresElsewhere: fifty wrong passwords
// for a name, each from another address, do not refuse the owner's right
// password from an address that has not failed; an address that failed for
// the name is still held up, right password or not.
func TestSignInLetsTheOwnerInDespiteFailuresElsewhere(t *testing.T) {
	a := behindProxy(t)
	for i := range 50 {
		addr := "198.51.100." + strconv.Itoa(i+1)
		if res, _ := a.signInAs(t, "owner", "wrong", forwardedFor(addr)); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("failure %d, the first from %s: %d, want 401 (checked, and counted)", i+1, addr, res.StatusCode)
		}
	}
	res, _ := a.signInAs(t, "owner", testPassword, forwardedFor("198.51.100.7"))
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Errorf("the right password from an address that failed for the name: %d (Retry-After %q), want 429 with Retry-After",
			res.StatusCode, res.Header.Get("Retry-After"))
	}
	if res, _ := a.signInAs(t, "owner", testPassword, forwardedFor("203.0.113.77")); res.StatusCode != http.StatusSeeOther {
		t.Errorf("the owner from an address that has not failed: %d, want 303 (signed in)", res.StatusCode)
	}
}

// TestSignInRefusesOverlongNames: a name over 256 bytes is a 400 page that
// says why, before anything is counted: 25 of them from one address leave
// it free to sign in. 256 bytes is still a name (a wrong one).
func TestSignInRefusesOverlongNames(t *testing.T) {
	a := behindProxy(t)
	from := forwardedFor("192.0.2.30")
	for i := range 25 {
		res, body := a.signInAs(t, strings.Repeat("n", 299)+strconv.Itoa(i%10), "wrong", from)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "at most 256 bytes") {
			t.Fatalf("a 300-byte name: %d, want 400 saying a name is at most 256 bytes:\n%s", res.StatusCode, body)
		}
	}
	if res, _ := a.signInAs(t, strings.Repeat("n", 256), "wrong", from); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a 256-byte name: %d, want 401", res.StatusCode)
	}
	if res, _ := a.signInAs(t, "owner", testPassword, from); res.StatusCode != http.StatusSeeOther {
		t.Errorf("the owner from the address that sent the long names: %d, want 303 (nothing counted)", res.StatusCode)
	}
}

// TestSignInCountsAnIPv6ClientPerSlash64: twenty failures from addresses
// of one /64 throttle every address of it, and no address of another /64;
// an IPv4-mapped IPv6 address counts as its IPv4 address.
func TestSignInCountsAnIPv6ClientPerSlash64(t *testing.T) {
	a := behindProxy(t)
	for i := range 20 {
		addr := "2001:db8:1:2::" + strconv.FormatInt(int64(i+1), 16)
		if res, _ := a.signInAs(t, "guess"+strconv.Itoa(i), "wrong", forwardedFor(addr)); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d from %s: %d, want 401", i+1, addr, res.StatusCode)
		}
	}
	if res, _ := a.signInAs(t, "approver", testPassword, forwardedFor("2001:db8:1:2:ffff:ffff:ffff:ffff")); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("another address of the same /64: %d, want 429", res.StatusCode)
	}
	if res, _ := a.signInAs(t, "approver", testPassword, forwardedFor("2001:db8:1:3::1")); res.StatusCode != http.StatusSeeOther {
		t.Errorf("an address of the next /64: %d, want 303", res.StatusCode)
	}
	for i := range 20 {
		if res, _ := a.signInAs(t, "mapped"+strconv.Itoa(i), "wrong", forwardedFor("::ffff:192.0.2.40")); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d from ::ffff:192.0.2.40: %d, want 401", i+1, res.StatusCode)
		}
	}
	if res, _ := a.signInAs(t, "admin", testPassword, forwardedFor("192.0.2.40")); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("192.0.2.40 after 20 failures from ::ffff:192.0.2.40: %d, want 429", res.StatusCode)
	}
}
