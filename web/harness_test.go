package web_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alexedwards/scs/mysqlstore"
	"github.com/alexedwards/scs/v2"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/metrics"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store/testrig"
	"github.com/turnstile-dev/turnstile/web"
)

// Configurations the web tests run; ${order_id} comes from the prompt.
// Each round's text and arguments carry markers that must never reach an
// inbox stream.
var testConfigs = []string{`
identifier: refund
name: Refund
provider:
  type: scripted
  script:
    rounds:
      - text: "MARKER-TEXT looking up"
        tool_calls: [{name: lookup_order, arguments: {order_id: "${order_id}"}}]
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}", reason: "MARKER-ARG"}}]
      - text: "MARKER-ANSWER refunded"
tools: [lookup_order, refund_order]
`, `
identifier: four-eyes
name: Four eyes
require_second_approver: true
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - text: "done"
tools: [refund_order]
`, `
identifier: input
name: Input
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: ask_operator, arguments: {question: "How much?"}}]
      - text: "thanks"
tools: [ask_operator]
`, `
identifier: silent
name: Silent
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - tool_calls: [{name: slow_task, arguments: {seconds: 2.5, label: "MARKER-SILENT"}}]
      - text: "MARKER-ANSWER done"
tools: [refund_order, slow_task]
`, `
identifier: slow
name: Slow
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - delay: 300ms
        tool_calls: [{name: lookup_order, arguments: {order_id: "${order_id}"}}]
      - delay: 300ms
        tool_calls: [{name: lookup_order, arguments: {order_id: "${order_id}"}}]
      - delay: 300ms
        text: "done"
tools: [lookup_order, refund_order]
`}

// testApp is the whole web layer on a real MySQL, with the demo's roles:
// a world whose users are admin, approver (approve grant), owner (owns the
// runs), other (no grant, owns nothing), each with the password
// "password", and the server in front of its engine.
type testApp struct {
	*testrig.World
	srv    *httptest.Server
	server *web.Server
}

const testPassword = "password"

// newApp serves the web layer with the given keepalive (10 s when zero).
func newApp(t testing.TB, keepalive time.Duration, options ...func(*web.Deps)) *testApp {
	t.Helper()
	return newAppWith(t, keepalive, appEngine{}, options...)
}

// appEngine is what a test's engine brings beyond newApp's: the tools of
// src (none when nil), more configurations beside testConfigs, and a
// sealer of run content (plain when nil).
type appEngine struct {
	src     runtime.ToolSource
	configs []string
	sealer  runtime.Sealer
	// providers builds the configurations' providers; the scripted one's
	// when nil.
	providers runtime.ProviderFactory
	// statements, when set, counts every statement the app sends MySQL
	// (see statements_test.go).
	statements *statementCounter
}

// newAppWith is newApp whose engine brings what e says.
func newAppWith(t testing.TB, keepalive time.Duration, e appEngine, options ...func(*web.Deps)) *testApp {
	t.Helper()
	hash, err := web.HashPassword(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(nil)
	var onDB []testrig.Option
	if e.statements != nil {
		onDB = append(onDB, testrig.OnDB(e.statements.db(t)))
	}
	w := testrig.New(t, append(onDB, testrig.Configs(testConfigs...), testrig.Configs(e.configs...), testrig.PasswordHash(hash),
		testrig.Engine(runtime.Options{Metrics: m, Source: e.src, Sealer: e.sealer, Providers: e.providers}),
		testrig.Orders(builtin.Order{ID: "W-", Customer: "MARKER-CUSTOMER", AmountCents: 4200}), testrig.Prompt("Refund %s"))...)
	if err := m.WatchBacklog(w.Store); err != nil {
		t.Fatal(err)
	}
	sessions := scs.New()
	sessions.Store = mysqlstore.NewWithCleanupInterval(w.DB.DB, 0)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	deps := web.Deps{Logger: log, Ready: w.Store, Engine: w.Engine, Users: w.Store, Tokens: w.Store, Credentials: w.Store, Catalog: w.Store,
		Events: w.Engine, Sessions: sessions, Keepalive: keepalive, Metrics: m, Webhooks: w.Store}
	for _, o := range options {
		o(&deps)
	}
	server := web.New(deps)
	if err := m.WatchSlots(server); err != nil {
		t.Fatal(err)
	}
	a := &testApp{World: w, srv: httptest.NewServer(server.Handler()), server: server}
	t.Cleanup(a.srv.Close)
	return a
}

// client is a browser without JavaScript: a cookie jar, no redirects
// followed, and the CSRF token of the last page it saw.
type client struct {
	t    testing.TB
	base string
	http *http.Client
	csrf string
}

// visitor is a client that is not signed in.
func (a *testApp) visitor(t testing.TB) *client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: a.srv.URL, http: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// signIn returns a client signed in as one of the test users.
func (a *testApp) signIn(t testing.TB, name string) *client {
	t.Helper()
	c := a.visitor(t)
	c.get("/login")
	res, _ := c.post("/login", url.Values{"username": {name}, "password": {testPassword}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/inbox" {
		t.Fatalf("sign-in of %s: %d to %q", name, res.StatusCode, res.Header.Get("Location"))
	}
	c.get("/inbox") // the session's new CSRF token
	return c
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

func (c *client) do(req *http.Request) (*http.Response, string) {
	c.t.Helper()
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	body := string(b)
	if m := csrfField.FindStringSubmatch(body); m != nil {
		c.csrf = m[1]
	}
	return res, body
}

func (c *client) get(path string) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	return c.do(req)
}

// post sends a form with the client's CSRF token (unless the form has its
// own csrf_token, even an empty one).
func (c *client) post(path string, form url.Values) (*http.Response, string) {
	c.t.Helper()
	return c.do(c.postRequest(path, form, ""))
}

func (c *client) postRequest(path string, form url.Values, accept string) *http.Request {
	c.t.Helper()
	if _, ok := form["csrf_token"]; !ok {
		form.Set("csrf_token", c.csrf)
	}
	req, _ := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	return req
}

var flashText = regexp.MustCompile(`data-testid="flash"[^>]*>([^<]*)<`)

// flash loads the inbox and returns its flash message.
func (c *client) flash() string {
	c.t.Helper()
	_, body := c.get("/inbox")
	if m := flashText.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}
