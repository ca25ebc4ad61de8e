package templates

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"golang.org/x/net/html"
)

// render renders c and parses the result, failing the test on either error.
func render(t *testing.T, c templ.Component) (string, *html.Node) {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	doc, err := html.Parse(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return buf.String(), doc
}

// findAll returns every element below n for which match is true.
func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	return out
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// is matches an element by tag and attributes; an attribute value of "*"
// only requires the attribute to be present.
func is(tag string, attrs ...string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		if tag != "" && n.Data != tag {
			return false
		}
		for i := 0; i+1 < len(attrs); i += 2 {
			v, ok := attr(n, attrs[i])
			if !ok || (attrs[i+1] != "*" && v != attrs[i+1]) {
				return false
			}
		}
		return true
	}
}

// one returns the single element matching; it fails unless there is
// exactly one.
func one(t *testing.T, n *html.Node, what string, match func(*html.Node) bool) *html.Node {
	t.Helper()
	got := findAll(n, match)
	if len(got) != 1 {
		t.Fatalf("%s: got %d matches, want 1", what, len(got))
	}
	return got[0]
}

func none(t *testing.T, n *html.Node, what string, match func(*html.Node) bool) {
	t.Helper()
	if got := findAll(n, match); len(got) != 0 {
		t.Errorf("%s: got %d matches, want none", what, len(got))
	}
}

func text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
			b.WriteByte(' ')
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func wantAttr(t *testing.T, n *html.Node, key, want string) {
	t.Helper()
	got, ok := attr(n, key)
	if !ok {
		t.Errorf("<%s> has no %s attribute, want %q", n.Data, key, want)
		return
	}
	if got != want {
		t.Errorf("<%s %s>: got %q, want %q", n.Data, key, got, want)
	}
}

// wantText fails unless the one element matching inside n reads want.
func wantText(t *testing.T, n *html.Node, what string, match func(*html.Node) bool, want string) {
	t.Helper()
	if got := text(one(t, n, what, match)); got != want {
		t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

func ptr(f float64) *float64 { return &f }

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func samplePage() Page {
	return Page{Title: "Inbox", User: &User{Name: "olga"}, CSRF: "tok-123", Flash: "Run 7 completed."}
}

func TestInboxApproval(t *testing.T) {
	p := InboxPage{Page: samplePage(), Now: now, Total: 1, Runs: []InboxRun{{
		ID: 42, Configuration: "Refund agent", WaitingSince: now.Add(-3 * time.Minute),
		Kind: "approval", Digest: "d1g357", CanOpen: true,
		Note:  "The previous attempt was interrupted.",
		Calls: []Call{{ID: "call_1", Name: "refund_order", Arguments: "{\n  \"order\": 17\n}"}},
		Error: "The pending action changed.",
	}}}
	out, doc := render(t, Inbox(p))

	flash := one(t, doc, "flash", is("", "data-testid", "flash"))
	if got := text(flash); got != "Run 7 completed." {
		t.Errorf("flash: got %q", got)
	}
	wantAttr(t, flash, "role", "status")

	run := one(t, doc, "inbox run", is("article", "data-testid", "inbox-run"))
	wantAttr(t, run, "data-run-id", "42")
	if !strings.Contains(text(run), "waiting for 3 min") {
		t.Errorf("run text %q lacks the waited label", text(run))
	}
	wantAttr(t, one(t, run, "details link", is("a", "href", "/runs/42")), "href", "/runs/42")
	if got := text(one(t, run, "tool name", is("code"))); got != "refund_order" {
		t.Errorf("tool name: got %q", got)
	}
	if got := text(one(t, run, "arguments", is("pre"))); got != `{ "order": 17 }` {
		t.Errorf("arguments: got %q", got)
	}
	if got := text(one(t, run, "form error", is("", "data-testid", "form-error"))); got != "The pending action changed." {
		t.Errorf("form error: got %q", got)
	}
	if !strings.Contains(out, "The previous attempt was interrupted.") {
		t.Error("note missing")
	}

	form := one(t, run, "decision form", is("form", "data-stream", "*"))
	wantAttr(t, form, "method", "post")
	wantAttr(t, form, "action", "/inbox/runs/42/decision")
	wantAttr(t, one(t, form, "csrf_token", is("input", "type", "hidden", "name", "csrf_token")), "value", "tok-123")
	wantAttr(t, one(t, form, "turn_digest", is("input", "type", "hidden", "name", "turn_digest")), "value", "d1g357")
	once := one(t, form, "scope once", is("input", "type", "radio", "name", "scope", "value", "once"))
	if _, ok := attr(once, "checked"); !ok {
		t.Error("scope once is not checked")
	}
	one(t, form, "scope session", is("input", "type", "radio", "name", "scope", "value", "session"))
	wantAttr(t, one(t, form, "reason", is("textarea", "name", "reason")), "maxlength", "2000")
	for _, v := range []string{"approve", "deny"} {
		b := one(t, form, v+" button", is("button", "name", "decision", "value", v))
		wantAttr(t, b, "type", "submit")
	}
	progress := one(t, run, "progress", is("p", "data-testid", "progress"))
	if _, ok := attr(progress, "hidden"); !ok {
		t.Error("progress is not hidden")
	}
	none(t, doc, "four-eyes sentence", is("", "data-testid", "four-eyes"))
	// The layout: stylesheet, script, nav without the admin's playground,
	// and a logout form with the token.
	one(t, doc, "stylesheet", is("link", "href", "/static/style.css"))
	one(t, doc, "script", is("script", "src", "/static/inbox.js", "defer", "*"))
	none(t, doc, "playground link", is("a", "href", "/playground"))
	logout := one(t, doc, "logout form", is("form", "action", "/logout"))
	wantAttr(t, one(t, logout, "logout csrf", is("input", "name", "csrf_token")), "value", "tok-123")
	if got := text(one(t, doc, "title", is("title"))); got != "Inbox · Turnstile" {
		t.Errorf("title: got %q", got)
	}
}

func TestInboxFourEyes(t *testing.T) {
	p := InboxPage{Page: samplePage(), Now: now, Total: 1, Runs: []InboxRun{{
		ID: 9, Configuration: "Refund agent", WaitingSince: now, Kind: "approval", Digest: "x", FourEyes: true,
		Calls: []Call{{ID: "c", Name: "refund_order", Arguments: "{}"}},
	}}}
	_, doc := render(t, Inbox(p))
	none(t, doc, "approve button", is("button", "value", "approve"))
	one(t, doc, "deny button", is("button", "name", "decision", "value", "deny"))
	if got := text(one(t, doc, "four-eyes sentence", is("", "data-testid", "four-eyes"))); got != "Someone else has to approve this run; you may deny it." {
		t.Errorf("four-eyes sentence: got %q", got)
	}
	none(t, doc, "details link", is("a", "href", "/runs/9"))
}

func TestInboxInput(t *testing.T) {
	p := InboxPage{Page: samplePage(), Now: now, Total: 1, Runs: []InboxRun{{
		ID: 5, Configuration: "Input agent", WaitingSince: now.Add(-2*time.Hour - 5*time.Minute), Kind: "input", Digest: "dig5",
		Fields: []Field{
			{Name: "count", Label: "How many", Type: "integer", Required: true, Min: ptr(1), Max: ptr(10), Value: "11", Error: "must be at most 10"},
			{Name: "ratio", Type: "number", Value: "0.5"},
			{Name: "urgent", Type: "boolean", Value: "true", Required: true},
			{Name: "color", Type: "string", Enum: []string{"red", "green"}, Value: "green"},
			{Name: "comment", Type: "string", Description: "Anything else", Value: `a "quoted" <b>`},
		},
	}}}
	_, doc := render(t, Inbox(p))
	run := one(t, doc, "inbox run", is("article", "data-run-id", "5"))
	if !strings.Contains(text(run), "waiting for 2 h 5 min") {
		t.Errorf("run text %q lacks the waited label", text(run))
	}
	form := one(t, run, "input form", is("form", "action", "/inbox/runs/5/input", "data-stream", "*"))
	wantAttr(t, one(t, form, "turn_digest", is("input", "name", "turn_digest")), "value", "dig5")
	wantAttr(t, one(t, form, "csrf_token", is("input", "name", "csrf_token")), "value", "tok-123")
	none(t, form, "decision buttons", is("button", "name", "decision"))
	if got := text(one(t, form, "submit", is("button", "type", "submit"))); got != "Submit" {
		t.Errorf("submit button: got %q", got)
	}

	count := one(t, form, "count", is("input", "name", "count"))
	for k, v := range map[string]string{"type": "number", "step": "1", "min": "1", "max": "10", "value": "11", "aria-invalid": "true"} {
		wantAttr(t, count, k, v)
	}
	if _, ok := attr(count, "required"); !ok {
		t.Error("count is not required")
	}
	ferr := one(t, form, "field error", is("", "data-testid", "field-error"))
	wantAttr(t, ferr, "data-field", "count")
	if got := text(ferr); got != "must be at most 10" {
		t.Errorf("field error: got %q", got)
	}
	if count.NextSibling != ferr {
		t.Error("the field error does not follow its control")
	}
	one(t, form, "label of count", is("label", "for", "run-5-field-count"))

	ratio := one(t, form, "ratio", is("input", "name", "ratio"))
	wantAttr(t, ratio, "step", "any")
	wantAttr(t, ratio, "value", "0.5")
	if _, ok := attr(ratio, "required"); ok {
		t.Error("ratio is required")
	}

	urgent := one(t, form, "urgent", is("input", "name", "urgent"))
	wantAttr(t, urgent, "type", "checkbox")
	wantAttr(t, urgent, "value", "true")
	if _, ok := attr(urgent, "checked"); !ok {
		t.Error("urgent is not checked")
	}

	color := one(t, form, "color", is("select", "name", "color"))
	opts := findAll(color, is("option"))
	if len(opts) != 3 {
		t.Fatalf("color options: got %d, want 3 (empty, red, green)", len(opts))
	}
	if v, _ := attr(opts[0], "value"); v != "" {
		t.Errorf("first option: got %q, want the empty one", v)
	}
	if _, ok := attr(opts[2], "selected"); !ok {
		t.Error("green is not selected")
	}

	comment := one(t, form, "comment", is("input", "name", "comment"))
	wantAttr(t, comment, "type", "text")
	wantAttr(t, comment, "value", `a "quoted" <b>`)
	wantAttr(t, comment, "aria-describedby", "run-5-field-comment-help")
	one(t, form, "help", is("p", "id", "run-5-field-comment-help"))
	none(t, form, "approval form", is("input", "name", "scope"))
}

func TestInboxEmpty(t *testing.T) {
	p := InboxPage{Page: Page{User: &User{Name: "root", Admin: true}}, Now: now}
	out, doc := render(t, Inbox(p))
	if !strings.Contains(out, "Nothing waits for you.") {
		t.Error("empty state sentence missing")
	}
	none(t, doc, "inbox runs", is("", "data-testid", "inbox-run"))
	none(t, doc, "flash", is("", "data-testid", "flash"))
	one(t, doc, "playground link", is("a", "href", "/playground"))
}

func TestLogin(t *testing.T) {
	p := LoginPage{Page: Page{CSRF: "tok-9"}, Username: "olga", Error: "Wrong username or password."}
	out, doc := render(t, Login(p))
	form := one(t, doc, "login form", is("form", "action", "/login"))
	wantAttr(t, form, "method", "post")
	wantAttr(t, one(t, form, "csrf_token", is("input", "type", "hidden", "name", "csrf_token")), "value", "tok-9")
	user := one(t, form, "username", is("input", "name", "username"))
	wantAttr(t, user, "value", "olga")
	wantAttr(t, user, "autocomplete", "username")
	pw := one(t, form, "password", is("input", "name", "password"))
	wantAttr(t, pw, "type", "password")
	if _, ok := attr(pw, "value"); ok {
		t.Error("the password input has a value")
	}
	one(t, form, "submit", is("button", "type", "submit"))
	if got := text(one(t, doc, "login error", is("", "data-testid", "login-error"))); got != "Wrong username or password." {
		t.Errorf("login error: got %q", got)
	}
	none(t, doc, "logout form", is("form", "action", "/logout"))
	if !strings.Contains(out, "<title>Sign in · Turnstile</title>") {
		t.Error("default title missing")
	}

	_, doc = render(t, Login(LoginPage{}))
	none(t, doc, "login error", is("", "data-testid", "login-error"))
}

func TestError(t *testing.T) {
	p := ErrorPage{Status: 404, Heading: "Not found", Message: "There is no such run."}
	_, doc := render(t, Error(p))
	main := one(t, doc, "main", is("main"))
	if got, want := text(main), "Not found There is no such run. Back to the inbox"; got != want {
		t.Errorf("error page: got %q, want %q", got, want)
	}
	one(t, main, "inbox link", is("a", "href", "/inbox"))

	_, doc = render(t, Error(ErrorPage{Status: 500}))
	if got := text(one(t, doc, "heading", is("h1"))); got != "Internal Server Error" {
		t.Errorf("fallback heading: got %q", got)
	}
}

func TestRunDetail(t *testing.T) {
	p := RunPage{
		Page: samplePage(),
		Run: RunSummary{
			ID: 42, Configuration: "Refund agent", Owner: "olga", Origin: "interactive",
			Status: "failed", Reason: "approval_denied", Prompt: "Refund order 17", Iterations: 2,
			CreatedAt: now, UpdatedAt: now, Waiting: true, CanCancel: true,
		},
		Events: []TimelineEvent{
			{Seq: 1, Kind: "llm", Round: 1, Duration: "120 ms", At: now, Raw: `{"tokens": 12}`, Model: &ModelStep{}},
			{Seq: 2, Kind: "suspend", Round: 1, At: now},
		},
	}
	out, doc := render(t, RunDetail(p))
	events := findAll(doc, is("li", "data-testid", "event"))
	if len(events) != 2 {
		t.Fatalf("events: got %d, want 2", len(events))
	}
	for i, want := range []struct{ seq, kind string }{{"1", "llm"}, {"2", "suspend"}} {
		wantAttr(t, events[i], "data-seq", want.seq)
		wantAttr(t, events[i], "data-kind", want.kind)
	}
	if got := text(one(t, events[0], "payload", is("pre"))); got != `{"tokens": 12}` {
		t.Errorf("payload: got %q", got)
	}
	cancel := one(t, doc, "cancel form", is("form", "action", "/runs/42/cancel"))
	wantAttr(t, one(t, cancel, "csrf_token", is("input", "name", "csrf_token")), "value", "tok-123")
	if got := text(one(t, cancel, "cancel button", is("button"))); got != "Cancel run" {
		t.Errorf("cancel button: got %q", got)
	}
	for _, s := range []string{"approval_denied", "Refund order 17", "interactive"} {
		if !strings.Contains(out, s) {
			t.Errorf("run page lacks %q", s)
		}
	}
	one(t, doc, "waiting note", is("", "data-testid", "run-waiting"))
	none(t, doc, "answer", is("", "data-testid", "run-answer"))

	p.Run.CanCancel, p.Run.Waiting = false, false
	_, doc = render(t, RunDetail(p))
	none(t, doc, "cancel form", is("form", "action", "/runs/42/cancel"))
	none(t, doc, "waiting note", is("", "data-testid", "run-waiting"))
}

func TestWaited(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0 s"},
		{12 * time.Second, "12 s"},
		{3*time.Minute + 59*time.Second, "3 min"},
		{2 * time.Hour, "2 h"},
		{2*time.Hour + 5*time.Minute, "2 h 5 min"},
		{4*24*time.Hour + 3*time.Hour, "4 d"},
	} {
		if got := waited(now.Add(-tc.d), now); got != tc.want {
			t.Errorf("waited(%v): got %q, want %q", tc.d, got, tc.want)
		}
	}
}
