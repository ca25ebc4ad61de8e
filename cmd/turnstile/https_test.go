package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// TestHTTPSHygiene: behind HTTPS (an https --public-url, or
// --secure-cookies) every answer sends Strict-Transport-Security, and an
// https --public-url marks the cookies Secure without --secure-cookies:
// the sign-in form's CSRF cookie and the session cookie alike. Over plain
// HTTP neither is sent, and --secure-cookies=false is obeyed.
func TestHTTPSHygiene(t *testing.T) {
	_, dsn := dbtest.New(t)
	if _, stderr, err := turnstile(t, dsn, "user", "add", "--name", "ada", "--role", "user"); err != nil {
		t.Fatalf("user add: %v\n%s", err, stderr)
	}
	const hsts = "max-age=31536000"
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		hsts   bool
		secure bool
	}{
		{"plain http", nil, nil, false, false},
		{"https public url", nil, []string{"--public-url", "https://turnstile.example"}, true, true},
		{"https public url from the environment", []string{"TURNSTILE_PUBLIC_URL=https://turnstile.example/"}, nil, true, true},
		{"secure cookies", nil, []string{"--secure-cookies"}, true, true},
		{"https public url, secure cookies turned off", nil, []string{"--public-url", "https://turnstile.example", "--secure-cookies=false"}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := freeAddr(t)
			s := startServer(t, addr, childEnv(tc.env...), append([]string{"--addr", addr, "--dsn", dsn, "--workers", "0"}, tc.args...)...)
			defer s.stop(t)
			client := &http.Client{Timeout: 10 * time.Second,
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := client.Get("http://" + addr + "/login")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			csrf := cookieNamed(resp, "turnstile_login_csrf")
			m := csrfField.FindStringSubmatch(string(body))
			if csrf == nil || m == nil {
				t.Fatalf("GET /login: no CSRF cookie or field (%d)", resp.StatusCode)
			}
			// The cookie goes back by hand: a client's jar keeps a Secure
			// cookie from a plain-HTTP address.
			form := url.Values{"csrf_token": {m[1]}, "username": {"ada"}, "password": {"a long password"}}
			req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/login", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(&http.Cookie{Name: csrf.Name, Value: csrf.Value})
			signedIn, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			signedIn.Body.Close()
			session := cookieNamed(signedIn, "turnstile_session")
			if signedIn.StatusCode != http.StatusSeeOther || session == nil {
				t.Fatalf("POST /login = %d with cookies %v, want 303 and a session", signedIn.StatusCode, signedIn.Cookies())
			}
			// Sign-in clears the CSRF cookie with the attributes it was set
			// with.
			cleared := cookieNamed(signedIn, "turnstile_login_csrf")
			if cleared == nil || cleared.MaxAge >= 0 {
				t.Fatalf("POST /login did not clear the CSRF cookie: %v", signedIn.Cookies())
			}
			for _, c := range []*http.Cookie{csrf, session, cleared} {
				if c.Secure != tc.secure {
					t.Errorf("cookie %s: Secure %v, want %v", c.Name, c.Secure, tc.secure)
				}
			}
			for _, r := range []*http.Response{resp, signedIn} {
				got := r.Header.Get("Strict-Transport-Security")
				if (tc.hsts && got != hsts) || (!tc.hsts && got != "") {
					t.Errorf("%s %s: Strict-Transport-Security %q, want it: %v (%s)", r.Request.Method, r.Request.URL.Path, got, tc.hsts, hsts)
				}
			}
		})
	}
}

func cookieNamed(r *http.Response, name string) *http.Cookie {
	for _, c := range r.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}
