package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp/examplemcp"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// ordersYAML asks the example orders server, which is sent the run's
// credential, for the asker's orders.
const ordersYAML = `
identifier: my-orders
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: orders__my_orders, arguments: {}}]
      - text: "Here they are."
mcp_servers:
  - name: orders
    url: ${ORDERS_URL}
    identity: forward
    requires_approval: false
privacy_level: full
notify: [{url: "https://hooks.example.com/turnstile"}]
`

// orderBook is the example server's data here: by user name.
type orderBook map[string][]examplemcp.Order

func (b orderBook) OrdersOf(_ context.Context, owner string) ([]examplemcp.Order, error) {
	return b[owner], nil
}

// ordersApp is the app with the example orders server in front of it,
// which introspects every credential at the app over HTTP with a token
// of admin's that has the scope identity:introspect.
func ordersApp(t *testing.T) *testApp {
	t.Helper()
	var handler atomic.Pointer[http.Handler]
	orders := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*handler.Load()).ServeHTTP(w, r) }))
	t.Cleanup(orders.Close)
	src := mcp.NewSource(mcp.Options{Getenv: func(n string) string {
		if n == "ORDERS_URL" {
			return orders.URL
		}
		return ""
	}})
	t.Cleanup(func() { src.Close() })
	a := newAppWith(t, 0, appEngine{src: src, configs: []string{ordersYAML}})
	tok, _ := a.token(t, "admin", runtime.ScopeIdentityIntrospect)
	h := examplemcp.Handler(examplemcp.Remote{URL: a.srv.URL + "/api/identity/introspect", Token: tok}, orderBook{
		"owner": {{ID: "ORD-7", Customer: "MARKER-OWNERS", AmountCents: 1200, Currency: "EUR"}},
		"other": {{ID: "ORD-8", Customer: "MARKER-OTHERS", AmountCents: 800, Currency: "EUR"}},
	})
	handler.Store(&h)
	return a
}

// Two people ask the same question through the API and each gets their
// own orders: the example server knows who asked only from Turnstile's
// introspection of the credential it was sent.
func TestSameQuestionOwnAnswers(t *testing.T) {
	a := ordersApp(t)
	for _, c := range []struct{ user, mine, theirs string }{{"owner", "MARKER-OWNERS", "MARKER-OTHERS"}, {"other", "MARKER-OTHERS", "MARKER-OWNERS"}} {
		out, _ := a.Start(t, testrig.Launch{Configuration: "my-orders", Owner: c.user, Prompt: "What are my orders?"})
		if out.Status != runtime.StatusCompleted {
			t.Fatalf("%s: outcome %+v, want completed", c.user, out)
		}
		ans := a.bearer(t, c.user, runtime.ScopeRunRead).call(t, a, "GET", runPathAPI(out.RunID, "/messages"), "", nil)
		body := string(ans.body)
		if ans.status != http.StatusOK || !strings.Contains(body, c.mine) || strings.Contains(body, c.theirs) {
			t.Errorf("%s: messages %d %s, want %s and not %s", c.user, ans.status, body, c.mine, c.theirs)
		}
		// The credential is in none of what people and webhooks see.
		_, page := a.signIn(t, c.user).get(runPath(out.RunID, ""))
		detail := a.bearer(t, c.user, runtime.ScopeRunRead).call(t, a, "GET", runPathAPI(out.RunID, ""), "", nil)
		if !strings.Contains(page, "my_orders") || detail.status != http.StatusOK {
			t.Errorf("%s: the run page lacks the call, or its API answer is %d", c.user, detail.status)
		}
		seen := []string{body, page, string(detail.body)}
		for _, row := range a.Outbox(t, out.RunID) {
			seen = append(seen, string(row.Body))
		}
		if len(seen) < 4 {
			t.Errorf("%s: no webhook was queued", c.user)
		}
		for i, v := range seen {
			if strings.Contains(v, "tsr_") {
				t.Errorf("%s: a run credential is shown (%d): %s", c.user, i, v)
			}
		}
	}
}

func TestIntrospect(t *testing.T) {
	a := newApp(t, 0)
	ctx := context.Background()
	// Three runs held as a continuation holds them, each with its
	// credential; one expired, and the run of another paused (revoked).
	var runs []int64
	for range 3 {
		out, _ := a.Waiting(t, "refund")
		if _, err := a.DB.Exec(`UPDATE runs SET status = 'running', claimed_by = 'holder',
			lease_expires_at = NOW(6) + INTERVAL 1 MINUTE WHERE id = ?`, out.RunID); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, out.RunID)
	}
	mint := func(run int64) string {
		tok, err := a.Store.MintRunToken(ctx, run, a.Users["owner"].ID, "holder", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	live, revoked, expired := mint(runs[0]), mint(runs[1]), mint(runs[2])
	if _, err := a.DB.Exec(`UPDATE runs SET status = 'waiting_for_approval' WHERE id = ?`, runs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DB.Exec(`UPDATE run_tokens SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE run_id = ?`, runs[2]); err != nil {
		t.Fatal(err)
	}
	server := a.bearer(t, "admin", runtime.ScopeIdentityIntrospect)
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}

	// Live, by form and by JSON: who the credential acts for.
	for _, req := range []struct {
		body   string
		header http.Header
	}{{url.Values{"token": {live}}.Encode(), form}, {jsonBody(t, map[string]string{"token": live}), nil}} {
		got := server.call(t, a, "POST", "/api/identity/introspect", req.body, req.header).wantKeys(t, http.StatusOK,
			"active", "sub", "user_id", "run_id", "configuration", "grants", "role", "exp")
		if got["active"] != true || got["sub"] != "owner" || got["run_id"] != float64(runs[0]) ||
			got["configuration"] != "refund" || got["role"] != "user" || got["exp"].(float64) < float64(time.Now().Add(59*time.Minute).Unix()) {
			t.Errorf("introspection of a live credential = %v", got)
		}
	}
	// Everything else: {"active":false}, and nothing more.
	for name, tok := range map[string]string{"revoked": revoked, "expired": expired, "unknown": "tsr_" + strings.Repeat("a", 64),
		"malformed": "not-a-token", "an API token": "tst_" + strings.Repeat("a", 64)} {
		ans := server.call(t, a, "POST", "/api/identity/introspect", url.Values{"token": {tok}}.Encode(), form)
		if ans.status != http.StatusOK || strings.TrimSpace(string(ans.body)) != `{"active":false}` {
			t.Errorf("%s: %d %s, want 200 {\"active\":false}", name, ans.status, ans.body)
		}
	}
	// Who may ask.
	body := url.Values{"token": {live}}.Encode()
	server.call(t, a, "POST", "/api/identity/introspect", "", form).wantError(t, http.StatusBadRequest, "invalid_request")
	server.call(t, a, "POST", "/api/identity/introspect", `{"token":""}`, nil).wantError(t, http.StatusBadRequest, "invalid_request")
	a.bearer(t, "admin", otherScopes(runtime.ScopeIdentityIntrospect)...).call(t, a, "POST", "/api/identity/introspect", body, form).
		wantError(t, http.StatusForbidden, "insufficient_scope")
	a.session(t, "admin").call(t, a, "POST", "/api/identity/introspect", body, form).wantError(t, http.StatusUnauthorized, "unauthorized")
	anonymous().call(t, a, "POST", "/api/identity/introspect", body, form).wantError(t, http.StatusUnauthorized, "unauthorized")
	// A run credential is no API token.
	withAuthorization("run credential", "Bearer "+live).call(t, a, "POST", "/api/identity/introspect", body, form).
		wantError(t, http.StatusUnauthorized, "unauthorized")
}

// Malformed, unknown and revoked credentials cost the same statements:
// one lookup by hash each, so the answer's time tells nothing.
func TestIntrospectOneLookupForEveryInactive(t *testing.T) {
	counter := &statementCounter{}
	a := newAppWith(t, 0, appEngine{statements: counter})
	server := a.bearer(t, "admin", runtime.ScopeIdentityIntrospect)
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	// The caller's token is used once first, so that its expiry's slide
	// is not counted below.
	server.call(t, a, "POST", "/api/identity/introspect", "token=x", form)
	var sent [][]string
	for _, tok := range []string{"x", "tsr_" + strings.Repeat("b", 64), strings.Repeat("é", 300)} {
		counter.start()
		server.call(t, a, "POST", "/api/identity/introspect", url.Values{"token": {tok}}.Encode(), form)
		sent = append(sent, counter.stop())
	}
	for i, s := range sent {
		if !slices.Equal(s, sent[0]) || !slices.ContainsFunc(s, func(q string) bool { return strings.HasPrefix(q, "SELECT t.run_id, t.expires_at") }) {
			t.Errorf("statements of inactive credential %d = %q, want one run_tokens lookup like %q", i, s, sent[0])
		}
	}
}
