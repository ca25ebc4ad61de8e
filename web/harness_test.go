package web_test

import (
	"context"
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
	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/runtime/metrics"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
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

// testApp is the whole web layer on a real MySQL, with the demo's roles.
type testApp struct {
	srv *httptest.Server
	db  *sqlx.DB
	st  *store.Store
	eng *runtime.Engine
	// Users by role: admin, approver (approve grant), owner (owns the
	// runs), other (no grant, owns nothing). Every password is "password".
	users  map[string]*runtime.User
	orders int
}

const testPassword = "password"

// newApp serves the web layer with the given keepalive (10 s when zero).
func newApp(t testing.TB, keepalive time.Duration, options ...func(*web.Deps)) *testApp {
	t.Helper()
	db, _ := dbtest.New(t)
	st := store.New(db)
	tools := builtin.Registry(builtin.Tools(st)...)
	m := metrics.New(nil)
	if err := m.WatchBacklog(st); err != nil {
		t.Fatal(err)
	}
	eng := runtime.New(runtime.Options{Store: st, Tools: tools, Providers: scripted.Factory, Validator: schema.New(), Metrics: m})
	ctx := context.Background()
	for _, y := range testConfigs {
		cfg, err := configfile.Parse("test.yaml", []byte(y), func(n string) bool { _, ok := tools[n]; return ok })
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SaveConfiguration(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	hash, err := web.HashPassword(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	a := &testApp{db: db, st: st, eng: eng, users: map[string]*runtime.User{}}
	for name, u := range map[string]runtime.User{
		"admin":    {Role: runtime.RoleAdmin},
		"approver": {Role: runtime.RoleUser, Grants: []string{runtime.GrantApprove}},
		"owner":    {Role: runtime.RoleUser},
		"other":    {Role: runtime.RoleUser},
	} {
		u.Name, u.PasswordHash = name, hash
		if err := st.CreateUser(ctx, &u); err != nil {
			t.Fatal(err)
		}
		a.users[name] = &u
	}
	sessions := scs.New()
	sessionStore := mysqlstore.NewWithCleanupInterval(db.DB, 0)
	sessions.Store = sessionStore
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	deps := web.Deps{Logger: log, Ready: st, Engine: eng, Users: st, Tokens: st, Catalog: st, Events: eng, Sessions: sessions, Keepalive: keepalive, Metrics: m}
	for _, o := range options {
		o(&deps)
	}
	server := web.New(deps)
	if err := m.WatchSlots(server); err != nil {
		t.Fatal(err)
	}
	a.srv = httptest.NewServer(server.Handler())
	t.Cleanup(a.srv.Close)
	return a
}

// waiting starts a run of a configuration, owned by "owner", on a fresh
// order, and runs it until it pauses.
func (a *testApp) waiting(t testing.TB, cfg string) (runtime.Outcome, string) {
	t.Helper()
	a.orders++
	order := "W-" + strings.Repeat("0", 3) + string(rune('0'+a.orders%10)) + time.Now().Format("150405.000000")
	order = regexp.MustCompile(`[^A-Z0-9-]`).ReplaceAllString(order, "")
	ctx := context.Background()
	if err := a.st.CreateDemoOrder(ctx, runtime.Order{ID: order, Customer: "MARKER-CUSTOMER", AmountCents: 4200}); err != nil {
		t.Fatal(err)
	}
	c, err := a.eng.Start(ctx, runtime.StartRequest{Configuration: cfg, Prompt: "Refund " + order, Owner: a.users["owner"].Actor()})
	if err != nil {
		t.Fatal(err)
	}
	out := c.Run(ctx, nil)
	if !out.Status.Waiting() {
		t.Fatalf("run of %s is %s (%v), want it waiting", cfg, out.Status, out.Err)
	}
	return out, order
}

func (a *testApp) run(t testing.TB, id int64) *runtime.Run {
	t.Helper()
	r, err := a.st.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (a *testApp) refunds(t testing.TB, order string) int {
	t.Helper()
	n, err := a.st.RefundCount(context.Background(), order)
	if err != nil {
		t.Fatal(err)
	}
	return n
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
