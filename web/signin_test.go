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

// TestSignInSlowsRepeatedFailures: five wrong passwords for one name go
// free; the sixth attempt must wait, with a 429 and Retry-After, whether
// the name exists or not, and even the right password is not checked
// until the wait is over. Another name from another address is not held
// up; twenty failures from one address hold that address up whatever the
// name.
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
	// The same name from anywhere else is held up too; another name is not.
	if res, _ := a.signInAs(t, "owner", testPassword, from("198.51.100.7")); res.StatusCode != http.StatusTooManyRequests {
		t.Errorf("owner from another address: %d, want 429 (the name is throttled)", res.StatusCode)
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
