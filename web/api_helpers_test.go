package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// caller sends JSON API requests one way of authenticating: a bearer token,
// a raw Authorization header, a signed-in session, or nothing.
type caller struct {
	name   string
	http   *http.Client
	header http.Header
}

// apiClient has no cookie jar and follows no redirect.
func apiClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// anonymous sends no credentials at all.
func anonymous() caller { return caller{name: "missing", http: apiClient(), header: http.Header{}} }

// withAuthorization sends the header as given.
func withAuthorization(name, value string) caller {
	return caller{name: name, http: apiClient(), header: http.Header{"Authorization": {value}}}
}

// token creates a bearer token for a test user with the given scopes and
// returns it with its id.
func (a *testApp) token(t testing.TB, user string, scopes ...string) (string, int64) {
	t.Helper()
	plain, tok, err := a.Store.CreateToken(context.Background(), a.Users[user].ID, scopes, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return plain, tok.ID
}

// bearer is a caller with a fresh token of a user.
func (a *testApp) bearer(t testing.TB, user string, scopes ...string) caller {
	t.Helper()
	plain, _ := a.token(t, user, scopes...)
	return withAuthorization("token", "Bearer "+plain)
}

// expiredBearer is a caller whose token expired a second ago.
func (a *testApp) expiredBearer(t testing.TB, user string, scopes ...string) caller {
	t.Helper()
	plain, id := a.token(t, user, scopes...)
	if _, err := a.DB.Exec(`UPDATE api_tokens SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	return withAuthorization("expired token", "Bearer "+plain)
}

// revokedBearer is a caller whose token was revoked.
func (a *testApp) revokedBearer(t testing.TB, user string, scopes ...string) caller {
	t.Helper()
	plain, id := a.token(t, user, scopes...)
	if err := a.Store.RevokeToken(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	return withAuthorization("revoked token", "Bearer "+plain)
}

// session is a caller signed in through the login form, with its cookie.
func (a *testApp) session(t testing.TB, user string) caller {
	t.Helper()
	c := a.signIn(t, user)
	return caller{name: "session", http: c.http, header: http.Header{}}
}

// otherScopes are every scope but one.
func otherScopes(scope string) []string {
	var out []string
	for _, s := range runtime.AllScopes() {
		if s != scope {
			out = append(out, s)
		}
	}
	return out
}

// apiAnswer is a JSON API response, read to its end.
type apiAnswer struct {
	status int
	header http.Header
	body   []byte
}

// call sends a request to the app and reads the whole answer.
func (c caller) call(t testing.TB, a *testApp, method, path, body string, header http.Header) apiAnswer {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return apiAnswer{status: res.StatusCode, header: res.Header, body: b}
}

// object decodes a JSON object answer, failing the test on anything else.
func (r apiAnswer) object(t testing.TB) map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type = %q, want application/json; body:\n%s", ct, r.body)
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.body)
	}
	return m
}

// wantError checks an error answer: its status and a body of exactly
// {"error":{"code":…,"message":…}} (plus the refusal's extra fields), with
// a message a person can read. It returns the error object.
func (r apiAnswer) wantError(t testing.TB, status int, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Errorf("status = %d, want %d; body: %s", r.status, status, r.body)
	}
	m := r.object(t)
	e, ok := m["error"].(map[string]any)
	if !ok || len(m) != 1 {
		t.Fatalf("body = %s, want {\"error\":{…}} and nothing else", r.body)
	}
	if got, _ := e["code"].(string); got != code {
		t.Errorf("error.code = %q, want %q; message %q", got, code, e["message"])
	}
	if msg, _ := e["message"].(string); len(msg) < 6 {
		t.Errorf("error.message = %q, want a sentence a person can act on", msg)
	}
	return e
}

// wantKeys checks a successful answer's status and its top-level keys.
func (r apiAnswer) wantKeys(t testing.TB, status int, keys ...string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body: %s", r.status, status, r.body)
	}
	m := r.object(t)
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("body has no %q: %s", k, r.body)
		}
	}
	return m
}

// lines decodes an NDJSON answer, one object per line.
func (r apiAnswer) lines(t testing.TB) []map[string]any {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/x-ndjson; charset=utf-8" {
		t.Fatalf("Content-Type = %q, want application/x-ndjson; charset=utf-8; body:\n%s", ct, r.body)
	}
	values, _ := testrig.Split(testrig.ReadAll(t, bytes.NewReader(r.body)))
	return values
}

// runPathAPI is /api/runs/{id} with a suffix.
func runPathAPI(id int64, suffix string) string {
	return "/api/runs/" + strconv.FormatInt(id, 10) + suffix
}

// jsonBody marshals a request body.
func jsonBody(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// approveBody is an approval of a turn, once.
func approveBody(t testing.TB, digest string) string {
	return jsonBody(t, map[string]string{"turn_digest": digest, "decision": "approve", "scope": "once"})
}

var ndjsonAccept = http.Header{"Accept": {"application/x-ndjson"}}
