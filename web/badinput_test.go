package web_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// formLimit is the most a form's body may weigh (web.maxFormBytes).
const formLimit = 64 << 10

// paddedApproval is an approval form whose encoded body is exactly size
// bytes, the reason taking up the slack.
func paddedApproval(t *testing.T, csrf, digest string, size int) string {
	t.Helper()
	f := approve(digest)
	f.Set("csrf_token", csrf)
	f.Set("reason", "")
	pad := size - len(f.Encode())
	if pad < 0 {
		t.Fatalf("a form of %d bytes cannot hold the approval", size)
	}
	f.Set("reason", strings.Repeat("a", pad))
	body := f.Encode()
	if len(body) != size {
		t.Fatalf("padded body is %d bytes, want %d", len(body), size)
	}
	return body
}

// TestBadRequestsClaimNothing: requests refused before any handler runs —
// no or a wrong CSRF token, a body too large, another site's POST — get
// their error page, and the run they aim at stays as it was.
func TestBadRequestsClaimNothing(t *testing.T) {
	a := newApp(t, 0)
	stranger := a.signIn(t, "other") // a valid token, of another session

	tests := []struct {
		name   string
		header http.Header
		// body builds the request body from the client's token and the
		// run's digest.
		body        func(t *testing.T, csrf, digest string) string
		wantStatus  int
		wantHeading string
		wantFlash   bool // a 303 to /inbox with a flash: the request got through
		// tokenInQuery puts the client's valid token in the query string.
		tokenInQuery bool
	}{
		{name: "no csrf_token",
			body: func(t *testing.T, csrf, digest string) string {
				return approve(digest).Encode()
			},
			wantStatus: http.StatusForbidden, wantHeading: "Forbidden"},
		{name: "empty csrf_token",
			body: func(t *testing.T, csrf, digest string) string {
				f := approve(digest)
				f.Set("csrf_token", "")
				return f.Encode()
			},
			wantStatus: http.StatusForbidden, wantHeading: "Forbidden"},
		{name: "wrong csrf_token",
			body: func(t *testing.T, csrf, digest string) string {
				f := approve(digest)
				f.Set("csrf_token", strings.Repeat("A", len(csrf)))
				return f.Encode()
			},
			wantStatus: http.StatusForbidden, wantHeading: "Forbidden"},
		{name: "csrf_token of another session",
			body: func(t *testing.T, csrf, digest string) string {
				f := approve(digest)
				f.Set("csrf_token", stranger.csrf)
				return f.Encode()
			},
			wantStatus: http.StatusForbidden, wantHeading: "Forbidden"},
		{name: "csrf_token in the query, not the body", tokenInQuery: true,
			body: func(t *testing.T, csrf, digest string) string {
				return approve(digest).Encode()
			},
			wantStatus: http.StatusForbidden, wantHeading: "Forbidden"},
		{name: "body one byte over 64 KiB",
			body: func(t *testing.T, csrf, digest string) string {
				return paddedApproval(t, csrf, digest, formLimit+1)
			},
			wantStatus: http.StatusRequestEntityTooLarge, wantHeading: "Too large"},
		{name: "body of 1 MiB",
			body: func(t *testing.T, csrf, digest string) string {
				return paddedApproval(t, csrf, digest, 1<<20)
			},
			wantStatus: http.StatusRequestEntityTooLarge, wantHeading: "Too large"},
		{name: "body of exactly 64 KiB gets through to the engine",
			body: func(t *testing.T, csrf, digest string) string {
				return paddedApproval(t, csrf, digest, formLimit)
			},
			wantStatus: http.StatusSeeOther, wantFlash: true},
		{name: "cross-site fetch",
			header: http.Header{"Sec-Fetch-Site": {"cross-site"}},
			body: func(t *testing.T, csrf, digest string) string {
				f := approve(digest)
				f.Set("csrf_token", csrf)
				return f.Encode()
			},
			wantStatus: http.StatusForbidden, wantHeading: "Forbidden"},
		{name: "another origin",
			header: http.Header{"Origin": {"http://evil.example"}},
			body: func(t *testing.T, csrf, digest string) string {
				f := approve(digest)
				f.Set("csrf_token", csrf)
				return f.Encode()
			},
			wantStatus: http.StatusForbidden, wantHeading: "Forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paused, _ := a.Waiting(t, "refund")
			c := a.signIn(t, "approver")
			path := inboxPath(paused.RunID, "decision")
			if tt.tokenInQuery {
				path += "?csrf_token=" + url.QueryEscape(c.csrf)
			}
			before := a.State(t, paused.RunID)
			res, body := c.raw(path, tt.body(t, c.csrf, paused.Digest), tt.header)
			a.Unchanged(t, paused.RunID, before)
			if tt.wantFlash {
				wantRedirect(t, res, "/inbox")
				if got, want := c.flashText(), "Run "+itoa(paused.RunID)+": the reason must be valid text of at most 2000 characters."; got != want {
					t.Errorf("flash = %q, want %q", got, want)
				}
				return
			}
			wantErrorPage(t, res, body, tt.wantStatus, tt.wantHeading)
		})
	}

	t.Run("same-origin fetch gets through", func(t *testing.T) {
		paused, _ := a.Waiting(t, "refund")
		c := a.signIn(t, "approver")
		f := approve(paused.Digest)
		f.Set("csrf_token", c.csrf)
		res, _ := c.raw(inboxPath(paused.RunID, "decision"), f.Encode(),
			http.Header{"Sec-Fetch-Site": {"same-origin"}, "Origin": {a.srv.URL}})
		wantRedirect(t, res, "/inbox")
		if got := a.Run(t, paused.RunID).Status; got != runtime.StatusCompleted {
			t.Errorf("status = %s, want completed", got)
		}
	})
	t.Run("GET on a form's address", func(t *testing.T) {
		paused, _ := a.Waiting(t, "refund")
		c := a.signIn(t, "approver")
		before := a.State(t, paused.RunID)
		res, body := c.get(inboxPath(paused.RunID, "decision") + "?" + approve(paused.Digest).Encode())
		wantErrorPage(t, res, body, http.StatusMethodNotAllowed, "Method not allowed")
		a.Unchanged(t, paused.RunID, before)
	})
	t.Run("sign-in without csrf_token", func(t *testing.T) {
		c := a.visitor(t)
		c.get("/login")
		res, body := c.raw("/login", url.Values{"username": {"owner"}, "password": {testPassword}}.Encode(), nil)
		wantErrorPage(t, res, body, http.StatusForbidden, "Forbidden")
		res, _ = c.get("/inbox")
		wantRedirect(t, res, "/login")
	})
}

// TestWrongPasswordSaysNothingMore: a wrong password and an unknown user
// get the same 401 page with one generic message, and no session.
func TestWrongPasswordSaysNothingMore(t *testing.T) {
	a := newApp(t, 0)
	const message = "The name or the password is wrong."
	tokenOrName := regexp.MustCompile(`value="[^"]*"`)

	attempt := func(t *testing.T, name, password string) string {
		t.Helper()
		c := a.visitor(t)
		c.get("/login")
		res, body := c.post("/login", url.Values{"username": {name}, "password": {password}})
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("sign-in as %q: status %d, want 401", name, res.StatusCode)
		}
		if got := strings.Count(body, `data-testid="login-error"`); got != 1 {
			t.Errorf("%d login errors, want 1", got)
		}
		if !strings.Contains(body, message) {
			t.Errorf("body lacks %q:\n%s", message, body)
		}
		if !strings.Contains(body, `value="`+name+`"`) {
			t.Errorf("the form lost the typed name %q", name)
		}
		if strings.Contains(body, password) {
			t.Errorf("the page shows the typed password")
		}
		if res, _ := c.get("/inbox"); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
			t.Errorf("after a failed sign-in /inbox answers %d to %q, want 303 to /login", res.StatusCode, res.Header.Get("Location"))
		}
		return tokenOrName.ReplaceAllString(body, `value="…"`)
	}
	wrongPassword := attempt(t, "owner", "not-the-password-1")
	unknownUser := attempt(t, "nobody", "not-the-password-2")
	if wrongPassword != unknownUser {
		t.Errorf("a wrong password and an unknown user get different pages:\nwrong password:\n%s\nunknown user:\n%s", wrongPassword, unknownUser)
	}
	for _, hint := range []string{"no such user", "unknown user", "not found", "incorrect password"} {
		if strings.Contains(strings.ToLower(wrongPassword), hint) {
			t.Errorf("the page hints %q", hint)
		}
	}
}

// TestStreamedRefusalsKeepTheirAnswers: a decision that asks for NDJSON
// but is refused never starts the stream: the same 303 and flash, or 422
// page, as without JavaScript.
func TestStreamedRefusalsKeepTheirAnswers(t *testing.T) {
	a := newApp(t, 0)
	ctx := context.Background()
	tests := []struct {
		name      string
		user      string
		setup     func(t *testing.T) (int64, string, url.Values)
		wantFlash string // for a 303; "" for a 422
		want404   bool
	}{
		{name: "stale digest", user: "approver",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o, _ := a.Waiting(t, "refund")
				return o.RunID, inboxPath(o.RunID, "decision"), approve("stale")
			},
			wantFlash: "The pending action of run %d changed; review it again."},
		{name: "a stranger, as for no run", user: "other",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o, _ := a.Waiting(t, "refund")
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			want404: true},
		{name: "settled run", user: "approver",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o, _ := a.Waiting(t, "refund")
				if _, err := a.Engine.Cancel(ctx, o.RunID, a.Users["owner"].Actor()); err != nil {
					t.Fatal(err)
				}
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			wantFlash: "Run %d no longer waits for this decision."},
		{name: "invalid input", user: "approver",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o, _ := a.Waiting(t, "input")
				return o.RunID, inboxPath(o.RunID, "input"), url.Values{"turn_digest": {o.Digest}, "amount": {"-3"}, "note": {"streamed"}}
			},
		},
		{name: "unknown run", user: "approver",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o, _ := a.Waiting(t, "refund")
				return o.RunID, "/inbox/runs/999999/decision", approve(o.Digest)
			},
			want404: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := a.signIn(t, tt.user)
			id, path, form := tt.setup(t)
			before := a.State(t, id)
			res, body := c.do(c.postRequest(path, form, "application/x-ndjson"))
			a.Unchanged(t, id, before)
			if ct := res.Header.Get("Content-Type"); strings.Contains(ct, "ndjson") {
				t.Errorf("Content-Type = %q: a refusal started the stream", ct)
			}
			switch {
			case tt.want404:
				wantErrorPage(t, res, body, http.StatusNotFound, "Not found")
			case tt.wantFlash == "":
				want422(t, res, body, id, "amount", []string{`value="-3"`, `value="streamed"`})
			default:
				wantRedirect(t, res, "/inbox")
				if got, want := c.flashText(), strings.Replace(tt.wantFlash, "%d", itoa(id), 1); got != want {
					t.Errorf("flash = %q, want %q", got, want)
				}
			}
		})
	}
}

// TestFormsRefuseBytesThatAreNotText: text that is not UTF-8 in any field
// of any form — a prompt, a reason, a user name, a field's name — is a 400
// page that says so, never a 500 from MySQL, and nothing is written.
func TestFormsRefuseBytesThatAreNotText(t *testing.T) {
	a := newApp(t, 0)
	paused := a.start(t, "refund", "owner", runtime.OriginInteractive)
	input := a.start(t, "input", "owner", runtime.OriginInteractive)
	tests := []struct {
		name, role, path string
		form             url.Values
	}{
		{"playground prompt", "admin", "/playground/runs", url.Values{"configuration": {"refund"}, "prompt": {"Refund \xff\xfe"}}},
		{"playground prompt, streamed", "admin", "/playground/runs?stream=1", url.Values{"configuration": {"refund"}, "prompt": {"\xc3"}}},
		{"playground configuration", "admin", "/playground/runs", url.Values{"configuration": {"ref\xffund"}, "prompt": {"Refund X-1"}}},
		{"decision reason", "approver", inboxPath(paused.RunID, "decision"), url.Values{"turn_digest": {paused.Digest}, "decision": {"deny"}, "reason": {"no \xff"}}},
		{"input field", "approver", inboxPath(input.RunID, "input"), url.Values{"turn_digest": {input.Digest}, "amount": {"250"}, "note": {"\xed\xa0\x80"}}},
		{"a field's name", "approver", inboxPath(paused.RunID, "decision"), url.Values{"turn_digest": {paused.Digest}, "decision": {"approve"}, "\xff": {"x"}}},
		{"user name at sign-in", "", "/login", url.Values{"username": {"own\xffer"}, "password": {"x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := a.as(t, tt.role)
			before, beforeInput, runs := a.State(t, paused.RunID), a.State(t, input.RunID), a.Count(t, `SELECT COUNT(*) FROM runs`)
			res, body := c.post(tt.path, tt.form)
			wantErrorPage(t, res, body, http.StatusBadRequest, "Bad request")
			if !strings.Contains(body, "not valid UTF-8") {
				t.Errorf("the page does not say what is wrong:\n%s", body)
			}
			a.Unchanged(t, paused.RunID, before)
			a.Unchanged(t, input.RunID, beforeInput)
			if n := a.Count(t, `SELECT COUNT(*) FROM runs`); n != runs {
				t.Errorf("%d runs after a refused form, want %d", n, runs)
			}
		})
	}
}
