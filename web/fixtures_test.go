package web_test

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// More configurations for the route and refusal tests: one to switch off,
// one whose refund takes a grant beyond approve, one that pauses twice, one
// that runs out of rounds, and one slow enough to be cancelled while it
// runs.
func init() {
	testConfigs = append(testConfigs, `
identifier: switched-off
name: Switched off
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - text: "done"
tools: [refund_order]
`, `
identifier: granted
name: Granted
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - text: "done"
tools: [refund_order]
tool_policies:
  refund_order: {grant: refunds}
`, `
identifier: twice
name: Twice
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}", amount_cents: 100}}]
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}", amount_cents: 200}}]
      - text: "two refunds"
tools: [refund_order]
`, `
identifier: short
name: Short
max_iterations: 1
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - text: "never reached"
tools: [refund_order]
`, `
identifier: crawl
name: Crawl
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - delay: 1s
        tool_calls: [{name: lookup_order, arguments: {order_id: "${order_id}"}}]
      - delay: 1s
        text: "done"
tools: [lookup_order, refund_order]
`)
}

// roles are the signed-in test users; "" is a visitor who is not signed in.
var roles = []string{"admin", "approver", "owner", "other", ""}

// roleName names a role in a subtest.
func roleName(role string) string {
	if role == "" {
		return "signed out"
	}
	return role
}

// as returns a client for a role: signed in, or a visitor who has seen the
// sign-in page (and so holds a valid CSRF token of its own session).
func (a *testApp) as(t testing.TB, role string) *client {
	t.Helper()
	if role == "" {
		c := a.visitor(t)
		c.get("/login")
		return c
	}
	return a.signIn(t, role)
}

// start starts a run of a configuration owned by the named user, with an
// origin, and runs it until it pauses or settles.
func (a *testApp) start(t testing.TB, cfg, owner string, origin runtime.Origin) runtime.Outcome {
	t.Helper()
	out, _ := a.Start(t, testrig.Launch{Configuration: cfg, Owner: owner, Origin: origin})
	return out
}

// flashText returns the flash of the next GET /inbox as the user reads it.
func (c *client) flashText() string {
	c.t.Helper()
	return html.UnescapeString(c.flash())
}

var (
	inboxRunID = regexp.MustCompile(`<article[^>]*data-testid="inbox-run"[^>]*data-run-id="([0-9]+)"`)
	eventItem  = regexp.MustCompile(`data-testid="event"`)
)

// inboxRuns are the ids of the runs an inbox page lists, in its order.
func inboxRuns(t testing.TB, body string) []int64 {
	t.Helper()
	ids := []int64{}
	for _, m := range inboxRunID.FindAllStringSubmatch(body, -1) {
		id, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// inboxCard is the part of an inbox page that shows one run, with its
// forms.
func inboxCard(t testing.TB, body string, id int64) string {
	t.Helper()
	i := strings.Index(body, fmt.Sprintf(`data-run-id="%d"`, id))
	if i < 0 {
		t.Fatalf("the inbox has no run %d:\n%s", id, body)
	}
	card := body[i:]
	if end := strings.Index(card, "</article>"); end >= 0 {
		card = card[:end]
	}
	return card
}

// wantErrorPage checks an HTML error page with its status and heading.
func wantErrorPage(t testing.TB, res *http.Response, body string, status int, heading string) {
	t.Helper()
	if res.StatusCode != status {
		t.Errorf("status = %d, want %d", res.StatusCode, status)
	}
	if got := res.Header.Get("Content-Type"); !strings.HasPrefix(got, "text/html") {
		t.Errorf("Content-Type = %q, want an HTML page", got)
	}
	if !strings.Contains(body, `data-testid="error"`) || !strings.Contains(body, "<h1>"+heading+"</h1>") {
		t.Errorf("body is not the %q error page:\n%s", heading, body)
	}
	if loc := res.Header.Get("Location"); loc != "" {
		t.Errorf("Location = %q on an error page, want none", loc)
	}
}

// wantRedirect checks a 303 and where it goes.
func wantRedirect(t testing.TB, res *http.Response, location string) {
	t.Helper()
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != location {
		t.Errorf("answer = %d to %q, want 303 to %q", res.StatusCode, res.Header.Get("Location"), location)
	}
}

func runPath(id int64, suffix string) string {
	return "/runs/" + strconv.FormatInt(id, 10) + suffix
}

func inboxPath(id int64, action string) string {
	return "/inbox/runs/" + strconv.FormatInt(id, 10) + "/" + action
}

// approve is the form of an Approve button pressed once.
func approve(digest string) url.Values {
	return url.Values{"turn_digest": {digest}, "decision": {"approve"}, "scope": {"once"}}
}

// answerForm is an input form that fits ask_operator's schema.
func answerForm(digest string) url.Values {
	return url.Values{"turn_digest": {digest}, "amount": {"250"}, "note": {"fine"}}
}

// raw sends a POST with a body and headers exactly as given.
func (c *client) raw(path, body string, header http.Header) (*http.Response, string) {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("POST %s: %v: the server closed the connection without an answer (a panic in a handler?)", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return res, string(b)
}

// sessionCookie is the client's session cookie as the jar holds it.
func (c *client) sessionCookie(t testing.TB) *http.Cookie {
	t.Helper()
	u, err := url.Parse(c.base)
	if err != nil {
		t.Fatal(err)
	}
	for _, ck := range c.http.Jar.Cookies(u) {
		if ck.Name == "session" {
			return ck
		}
	}
	t.Fatal("the client holds no session cookie")
	return nil
}
