package templates

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/turnstile-dev/turnstile/templates/htmltest"
)

// wantText fails unless the one element matching inside n reads want.
func wantText(t *testing.T, n *html.Node, what string, match func(*html.Node) bool, want string) {
	t.Helper()
	if got := htmltest.Text(htmltest.One(t, n, what, match)); got != want {
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
	out, doc := htmltest.Render(t, Inbox(p))

	flash := htmltest.One(t, doc, "flash", htmltest.Is("", "data-testid", "flash"))
	if got := htmltest.Text(flash); got != "Run 7 completed." {
		t.Errorf("flash: got %q", got)
	}
	htmltest.WantAttr(t, flash, "role", "status")

	run := htmltest.One(t, doc, "inbox run", htmltest.Is("article", "data-testid", "inbox-run"))
	htmltest.WantAttr(t, run, "data-run-id", "42")
	if !strings.Contains(htmltest.Text(run), "waiting for 3 min") {
		t.Errorf("run text %q lacks the waited label", htmltest.Text(run))
	}
	htmltest.WantAttr(t, htmltest.One(t, run, "details link", htmltest.Is("a", "href", "/runs/42")), "href", "/runs/42")
	if got := htmltest.Text(htmltest.One(t, run, "tool name", htmltest.Is("code"))); got != "refund_order" {
		t.Errorf("tool name: got %q", got)
	}
	if got := htmltest.Text(htmltest.One(t, run, "arguments", htmltest.Is("pre"))); got != `{ "order": 17 }` {
		t.Errorf("arguments: got %q", got)
	}
	if got := htmltest.Text(htmltest.One(t, run, "form error", htmltest.Is("", "data-testid", "form-error"))); got != "The pending action changed." {
		t.Errorf("form error: got %q", got)
	}
	if !strings.Contains(out, "The previous attempt was interrupted.") {
		t.Error("note missing")
	}

	form := htmltest.One(t, run, "decision form", htmltest.Is("form", "data-stream", "*"))
	htmltest.WantAttr(t, form, "method", "post")
	htmltest.WantAttr(t, form, "action", "/inbox/runs/42/decision")
	htmltest.WantAttr(t, htmltest.One(t, form, "csrf_token", htmltest.Is("input", "type", "hidden", "name", "csrf_token")), "value", "tok-123")
	htmltest.WantAttr(t, htmltest.One(t, form, "turn_digest", htmltest.Is("input", "type", "hidden", "name", "turn_digest")), "value", "d1g357")
	once := htmltest.One(t, form, "scope once", htmltest.Is("input", "type", "radio", "name", "scope", "value", "once"))
	if _, ok := htmltest.Attr(once, "checked"); !ok {
		t.Error("scope once is not checked")
	}
	htmltest.One(t, form, "scope session", htmltest.Is("input", "type", "radio", "name", "scope", "value", "session"))
	htmltest.WantAttr(t, htmltest.One(t, form, "reason", htmltest.Is("textarea", "name", "reason")), "maxlength", "2000")
	for _, v := range []string{"approve", "deny"} {
		b := htmltest.One(t, form, v+" button", htmltest.Is("button", "name", "decision", "value", v))
		htmltest.WantAttr(t, b, "type", "submit")
	}
	progress := htmltest.One(t, run, "progress", htmltest.Is("p", "data-testid", "progress"))
	if _, ok := htmltest.Attr(progress, "hidden"); !ok {
		t.Error("progress is not hidden")
	}
	htmltest.None(t, doc, "four-eyes sentence", htmltest.Is("", "data-testid", "four-eyes"))
	// The layout: stylesheet, script, nav without the admin's playground,
	// and a logout form with the token.
	htmltest.One(t, doc, "stylesheet", htmltest.Is("link", "href", "/static/style.css"))
	htmltest.One(t, doc, "script", htmltest.Is("script", "src", "/static/inbox.js", "defer", "*"))
	htmltest.None(t, doc, "playground link", htmltest.Is("a", "href", "/playground"))
	logout := htmltest.One(t, doc, "logout form", htmltest.Is("form", "action", "/logout"))
	htmltest.WantAttr(t, htmltest.One(t, logout, "logout csrf", htmltest.Is("input", "name", "csrf_token")), "value", "tok-123")
	if got := htmltest.Text(htmltest.One(t, doc, "title", htmltest.Is("title"))); got != "Inbox · Turnstile" {
		t.Errorf("title: got %q", got)
	}
}

func TestInboxFourEyes(t *testing.T) {
	p := InboxPage{Page: samplePage(), Now: now, Total: 1, Runs: []InboxRun{{
		ID: 9, Configuration: "Refund agent", WaitingSince: now, Kind: "approval", Digest: "x", FourEyes: true,
		Calls: []Call{{ID: "c", Name: "refund_order", Arguments: "{}"}},
	}}}
	_, doc := htmltest.Render(t, Inbox(p))
	htmltest.None(t, doc, "approve button", htmltest.Is("button", "value", "approve"))
	htmltest.One(t, doc, "deny button", htmltest.Is("button", "name", "decision", "value", "deny"))
	if got := htmltest.Text(htmltest.One(t, doc, "four-eyes sentence", htmltest.Is("", "data-testid", "four-eyes"))); got != "Someone else has to approve this run; you may deny it." {
		t.Errorf("four-eyes sentence: got %q", got)
	}
	htmltest.None(t, doc, "details link", htmltest.Is("a", "href", "/runs/9"))
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
	_, doc := htmltest.Render(t, Inbox(p))
	run := htmltest.One(t, doc, "inbox run", htmltest.Is("article", "data-run-id", "5"))
	if !strings.Contains(htmltest.Text(run), "waiting for 2 h 5 min") {
		t.Errorf("run text %q lacks the waited label", htmltest.Text(run))
	}
	form := htmltest.One(t, run, "input form", htmltest.Is("form", "action", "/inbox/runs/5/input", "data-stream", "*"))
	htmltest.WantAttr(t, htmltest.One(t, form, "turn_digest", htmltest.Is("input", "name", "turn_digest")), "value", "dig5")
	htmltest.WantAttr(t, htmltest.One(t, form, "csrf_token", htmltest.Is("input", "name", "csrf_token")), "value", "tok-123")
	htmltest.None(t, form, "decision buttons", htmltest.Is("button", "name", "decision"))
	if got := htmltest.Text(htmltest.One(t, form, "submit", htmltest.Is("button", "type", "submit"))); got != "Submit" {
		t.Errorf("submit button: got %q", got)
	}

	count := htmltest.One(t, form, "count", htmltest.Is("input", "name", "count"))
	for k, v := range map[string]string{"type": "number", "step": "1", "min": "1", "max": "10", "value": "11", "aria-invalid": "true"} {
		htmltest.WantAttr(t, count, k, v)
	}
	if _, ok := htmltest.Attr(count, "required"); !ok {
		t.Error("count is not required")
	}
	ferr := htmltest.One(t, form, "field error", htmltest.Is("", "data-testid", "field-error"))
	htmltest.WantAttr(t, ferr, "data-field", "count")
	if got := htmltest.Text(ferr); got != "must be at most 10" {
		t.Errorf("field error: got %q", got)
	}
	if count.NextSibling != ferr {
		t.Error("the field error does not follow its control")
	}
	htmltest.One(t, form, "label of count", htmltest.Is("label", "for", "run-5-field-count"))

	ratio := htmltest.One(t, form, "ratio", htmltest.Is("input", "name", "ratio"))
	htmltest.WantAttr(t, ratio, "step", "any")
	htmltest.WantAttr(t, ratio, "value", "0.5")
	if _, ok := htmltest.Attr(ratio, "required"); ok {
		t.Error("ratio is required")
	}

	urgent := htmltest.One(t, form, "urgent", htmltest.Is("input", "name", "urgent"))
	htmltest.WantAttr(t, urgent, "type", "checkbox")
	htmltest.WantAttr(t, urgent, "value", "true")
	if _, ok := htmltest.Attr(urgent, "checked"); !ok {
		t.Error("urgent is not checked")
	}

	color := htmltest.One(t, form, "color", htmltest.Is("select", "name", "color"))
	opts := htmltest.FindAll(color, htmltest.Is("option"))
	if len(opts) != 3 {
		t.Fatalf("color options: got %d, want 3 (empty, red, green)", len(opts))
	}
	if v, _ := htmltest.Attr(opts[0], "value"); v != "" {
		t.Errorf("first option: got %q, want the empty one", v)
	}
	if _, ok := htmltest.Attr(opts[2], "selected"); !ok {
		t.Error("green is not selected")
	}

	comment := htmltest.One(t, form, "comment", htmltest.Is("input", "name", "comment"))
	htmltest.WantAttr(t, comment, "type", "text")
	htmltest.WantAttr(t, comment, "value", `a "quoted" <b>`)
	htmltest.WantAttr(t, comment, "aria-describedby", "run-5-field-comment-help")
	htmltest.One(t, form, "help", htmltest.Is("p", "id", "run-5-field-comment-help"))
	htmltest.None(t, form, "approval form", htmltest.Is("input", "name", "scope"))
}

func TestInboxEmpty(t *testing.T) {
	p := InboxPage{Page: Page{User: &User{Name: "root", Admin: true}}, Now: now}
	out, doc := htmltest.Render(t, Inbox(p))
	if !strings.Contains(out, "Nothing waits for you.") {
		t.Error("empty state sentence missing")
	}
	htmltest.None(t, doc, "inbox runs", htmltest.Is("", "data-testid", "inbox-run"))
	htmltest.None(t, doc, "flash", htmltest.Is("", "data-testid", "flash"))
	htmltest.One(t, doc, "playground link", htmltest.Is("a", "href", "/playground"))
}

func TestLogin(t *testing.T) {
	p := LoginPage{Page: Page{CSRF: "tok-9"}, Username: "olga", Error: "Wrong username or password."}
	out, doc := htmltest.Render(t, Login(p))
	form := htmltest.One(t, doc, "login form", htmltest.Is("form", "action", "/login"))
	htmltest.WantAttr(t, form, "method", "post")
	htmltest.WantAttr(t, htmltest.One(t, form, "csrf_token", htmltest.Is("input", "type", "hidden", "name", "csrf_token")), "value", "tok-9")
	user := htmltest.One(t, form, "username", htmltest.Is("input", "name", "username"))
	htmltest.WantAttr(t, user, "value", "olga")
	htmltest.WantAttr(t, user, "autocomplete", "username")
	pw := htmltest.One(t, form, "password", htmltest.Is("input", "name", "password"))
	htmltest.WantAttr(t, pw, "type", "password")
	if _, ok := htmltest.Attr(pw, "value"); ok {
		t.Error("the password input has a value")
	}
	htmltest.One(t, form, "submit", htmltest.Is("button", "type", "submit"))
	if got := htmltest.Text(htmltest.One(t, doc, "login error", htmltest.Is("", "data-testid", "login-error"))); got != "Wrong username or password." {
		t.Errorf("login error: got %q", got)
	}
	htmltest.None(t, doc, "logout form", htmltest.Is("form", "action", "/logout"))
	if !strings.Contains(out, "<title>Sign in · Turnstile</title>") {
		t.Error("default title missing")
	}

	_, doc = htmltest.Render(t, Login(LoginPage{}))
	htmltest.None(t, doc, "login error", htmltest.Is("", "data-testid", "login-error"))
}

func TestError(t *testing.T) {
	p := ErrorPage{Status: 404, Heading: "Not found", Message: "There is no such run."}
	_, doc := htmltest.Render(t, Error(p))
	main := htmltest.One(t, doc, "main", htmltest.Is("main"))
	if got, want := htmltest.Text(main), "Not found There is no such run. Back to the inbox"; got != want {
		t.Errorf("error page: got %q, want %q", got, want)
	}
	htmltest.One(t, main, "inbox link", htmltest.Is("a", "href", "/inbox"))

	_, doc = htmltest.Render(t, Error(ErrorPage{Status: 500}))
	if got := htmltest.Text(htmltest.One(t, doc, "heading", htmltest.Is("h1"))); got != "Internal Server Error" {
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
	out, doc := htmltest.Render(t, RunDetail(p))
	events := htmltest.FindAll(doc, htmltest.Is("li", "data-testid", "event"))
	if len(events) != 2 {
		t.Fatalf("events: got %d, want 2", len(events))
	}
	for i, want := range []struct{ seq, kind string }{{"1", "llm"}, {"2", "suspend"}} {
		htmltest.WantAttr(t, events[i], "data-seq", want.seq)
		htmltest.WantAttr(t, events[i], "data-kind", want.kind)
	}
	if got := htmltest.Text(htmltest.One(t, events[0], "payload", htmltest.Is("pre"))); got != `{"tokens": 12}` {
		t.Errorf("payload: got %q", got)
	}
	cancel := htmltest.One(t, doc, "cancel form", htmltest.Is("form", "action", "/runs/42/cancel"))
	htmltest.WantAttr(t, htmltest.One(t, cancel, "csrf_token", htmltest.Is("input", "name", "csrf_token")), "value", "tok-123")
	if got := htmltest.Text(htmltest.One(t, cancel, "cancel button", htmltest.Is("button"))); got != "Cancel run" {
		t.Errorf("cancel button: got %q", got)
	}
	for _, s := range []string{"approval_denied", "Refund order 17", "interactive"} {
		if !strings.Contains(out, s) {
			t.Errorf("run page lacks %q", s)
		}
	}
	htmltest.One(t, doc, "waiting note", htmltest.Is("", "data-testid", "run-waiting"))
	htmltest.None(t, doc, "answer", htmltest.Is("", "data-testid", "run-answer"))

	p.Run.CanCancel, p.Run.Waiting = false, false
	_, doc = htmltest.Render(t, RunDetail(p))
	htmltest.None(t, doc, "cancel form", htmltest.Is("form", "action", "/runs/42/cancel"))
	htmltest.None(t, doc, "waiting note", htmltest.Is("", "data-testid", "run-waiting"))
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
