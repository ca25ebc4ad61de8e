package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alexedwards/scs/mysqlstore"
	"github.com/alexedwards/scs/v2"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
	"github.com/turnstile-dev/turnstile/web"
)

// browserAccept is what a browser sends with a native form post.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

// pgPrompt makes a fresh demo order and returns a prompt that names it,
// with the order.
func pgPrompt(t *testing.T, a *testApp) (prompt, order string) {
	t.Helper()
	order = a.Order(t)
	return "Refund " + order, order
}

func pgPath(id int64, action string) string {
	return "/playground/runs/" + strconv.FormatInt(id, 10) + "/" + action
}

// pgStream posts a playground form with stream=1 (and no Accept header:
// the form value alone asks for the stream) and returns every line,
// parsed, and the raw lines.
func pgStream(t *testing.T, c *client, path string, form url.Values) (*http.Response, []map[string]any, []string) {
	t.Helper()
	form.Set("stream", "1")
	res, err := c.http.Do(c.postRequest(path, form, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: status %d, want 200", path, res.StatusCode)
	}
	lines, raw := testrig.Split(testrig.ReadAll(t, res.Body))
	return res, lines, raw
}

// pgTerminal checks the shape of a playground stream — step lines with
// rising seq numbers and their content, keepalives, then exactly one
// terminal line, last — and returns the terminal line, the steps and the
// number of keepalives.
func pgTerminal(t *testing.T, lines []map[string]any, raw []string) (terminal map[string]any, steps []map[string]any, keepalives int) {
	t.Helper()
	if len(lines) == 0 {
		t.Fatal("the stream is empty")
	}
	terminals := 0
	lastSeq := 0.0
	for i, l := range lines {
		switch l["type"] {
		case "step":
			step, ok := l["step"].(map[string]any)
			if !ok {
				t.Fatalf("step line %q has no step object", raw[i])
			}
			seq, _ := l["seq"].(float64)
			if seq <= lastSeq || step["seq"] != seq {
				t.Errorf("step line %q: seq %v after %v, step.seq %v", raw[i], seq, lastSeq, step["seq"])
			}
			lastSeq = seq
			if _, ok := step["kind"].(string); !ok {
				t.Errorf("step line %q has no kind", raw[i])
			}
			if c, ok := step["content"]; !ok || c == nil {
				t.Errorf("step line %q has no content", raw[i])
			}
			steps = append(steps, step)
		case "keepalive":
			keepalives++
		case "done", "awaiting_approval", "awaiting_input", "cancelled", "error":
			terminals++
			if i != len(lines)-1 {
				t.Errorf("terminal line %q is line %d of %d, want it last", raw[i], i+1, len(lines))
			}
			terminal = l
		default:
			t.Errorf("unexpected line %q", raw[i])
		}
	}
	if terminals != 1 {
		t.Fatalf("%d terminal lines, want exactly 1:\n%s", terminals, strings.Join(raw, "\n"))
	}
	return terminal, steps, keepalives
}

// contents joins the content of every step, as JSON text.
func contents(t *testing.T, steps []map[string]any) string {
	t.Helper()
	var b strings.Builder
	for _, s := range steps {
		j, err := json.Marshal(s["content"])
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.String()
}

// runIDOf reads the run id of a terminal line or outcome.
func runIDOf(t *testing.T, m map[string]any) int64 {
	t.Helper()
	id, ok := m["run_id"].(float64)
	if !ok || id <= 0 {
		t.Fatalf("no run_id in %v", m)
	}
	return int64(id)
}

// TestPlaygroundByRole: the playground is for admins; to anyone else
// signed in it does not exist, and a visitor is sent to sign in. A POST
// by a non-admin starts nothing.
func TestPlaygroundByRole(t *testing.T) {
	a := newApp(t, 0)
	for _, role := range roles {
		t.Run(roleName(role), func(t *testing.T) {
			c := a.as(t, role)
			res, body := c.get("/playground")
			switch role {
			case "admin":
				if res.StatusCode != http.StatusOK {
					t.Fatalf("status = %d, want 200", res.StatusCode)
				}
				for _, want := range []string{
					`action="/playground/runs"`, `name="csrf_token"`, `<textarea id="playground-prompt" name="prompt"`,
					`<select id="playground-configuration" name="configuration"`,
					`value="refund"`, `value="input"`, `value="four-eyes" data-four-eyes`,
					`data-testid="playground-output"`, `<script src="/static/playground.js" defer>`,
				} {
					if !strings.Contains(body, want) {
						t.Errorf("the playground has no %s", want)
					}
				}
			case "":
				wantRedirect(t, res, "/login")
			default:
				wantErrorPage(t, res, body, http.StatusNotFound, "Not found")
			}
			if role == "admin" {
				return
			}
			prompt, _ := pgPrompt(t, a)
			var before int
			if err := a.DB.Get(&before, `SELECT COUNT(*) FROM runs`); err != nil {
				t.Fatal(err)
			}
			res, body = c.post("/playground/runs", url.Values{"configuration": {"refund"}, "prompt": {prompt}, "stream": {"1"}})
			if role == "" {
				wantRedirect(t, res, "/login")
			} else {
				wantErrorPage(t, res, body, http.StatusNotFound, "Not found")
			}
			var after int
			if err := a.DB.Get(&after, `SELECT COUNT(*) FROM runs`); err != nil {
				t.Fatal(err)
			}
			if after != before {
				t.Errorf("a refused start created %d runs", after-before)
			}
		})
	}
}

// TestPlaygroundStreamShowsEverything: the playground stream carries every
// step's full content (the opposite of the inbox's counts), ends with
// exactly one terminal line, and the awaiting_approval line's digest
// decides the run, which resumes in the same kind of stream.
func TestPlaygroundStreamShowsEverything(t *testing.T) {
	a := newApp(t, 0)
	c := a.signIn(t, "admin")
	prompt, order := pgPrompt(t, a)
	res, lines, raw := pgStream(t, c, "/playground/runs", url.Values{"configuration": {"refund"}, "prompt": {prompt}})
	for h, want := range map[string]string{"Content-Type": "application/x-ndjson; charset=utf-8",
		"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"} {
		if got := res.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	term, steps, _ := pgTerminal(t, lines, raw)
	if len(steps) == 0 {
		t.Fatal("no step lines")
	}
	all := contents(t, steps)
	for _, marker := range []string{"MARKER-TEXT", "MARKER-ARG", order} {
		if !strings.Contains(all, marker) {
			t.Errorf("no step carries %s: the playground must show full content\n%s", marker, all)
		}
	}
	if term["type"] != "awaiting_approval" {
		t.Fatalf("terminal line = %v, want awaiting_approval", term)
	}
	id := runIDOf(t, term)
	run := a.Run(t, id)
	if run.OwnerID != a.Users["admin"].ID || run.Origin != runtime.OriginInteractive {
		t.Errorf("run %d is owned by %d with origin %s, want the admin's interactive run", id, run.OwnerID, run.Origin)
	}
	digest, _ := term["turn_digest"].(string)
	if digest == "" || digest != run.TurnDigest {
		t.Errorf("turn_digest = %q, want the run's %q", digest, run.TurnDigest)
	}
	calls, _ := term["pending_calls"].([]any)
	if len(calls) != 1 {
		t.Fatalf("pending_calls = %v, want one", term["pending_calls"])
	}
	call, _ := calls[0].(map[string]any)
	args, _ := call["arguments"].(map[string]any)
	if call["name"] != "refund_order" || args["order_id"] != order || args["reason"] != "MARKER-ARG" {
		t.Errorf("pending call = %v, want refund_order of %s with its arguments", call, order)
	}
	if n := a.Refunds(t, order); n != 0 {
		t.Fatalf("refunds before the approval = %d", n)
	}
	lastSeq := steps[len(steps)-1]["seq"].(float64)

	_, lines, raw = pgStream(t, c, pgPath(id, "resume"), url.Values{"turn_digest": {digest}, "decision": {"approve"}, "scope": {"once"}})
	term, steps, _ = pgTerminal(t, lines, raw)
	if len(steps) == 0 {
		t.Fatal("the continuation sent no step lines")
	}
	if first := steps[0]["seq"].(float64); first != lastSeq+1 {
		t.Errorf("the continuation's first seq is %v, want %v", first, lastSeq+1)
	}
	answer, _ := term["answer"].(string)
	if term["type"] != "done" || !strings.Contains(answer, "MARKER-ANSWER") {
		t.Fatalf("terminal line = %v, want done with the answer", term)
	}
	if _, ok := term["iterations"].(float64); !ok {
		t.Errorf("done line has no iterations: %v", term)
	}
	if _, ok := term["usage"].(map[string]any); !ok {
		t.Errorf("done line has no usage: %v", term)
	}
	if got := a.Run(t, id).Status; got != runtime.StatusCompleted {
		t.Errorf("run status = %s, want completed", got)
	}
	if n := a.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want exactly 1", n)
	}
}

// TestPlaygroundInputStream: an input pause ends the stream with the tool,
// its schema and the digest; the answer, posted as the schema's fields,
// resumes the run.
func TestPlaygroundInputStream(t *testing.T) {
	a := newApp(t, 0)
	c := a.signIn(t, "admin")
	_, lines, raw := pgStream(t, c, "/playground/runs", url.Values{"configuration": {"input"}, "prompt": {"How much?"}})
	term, _, _ := pgTerminal(t, lines, raw)
	if term["type"] != "awaiting_input" || term["tool"] != "ask_operator" {
		t.Fatalf("terminal line = %v, want awaiting_input on ask_operator", term)
	}
	schema, _ := term["schema"].(map[string]any)
	if props, _ := schema["properties"].(map[string]any); props["amount"] == nil {
		t.Errorf("schema = %v, want the amount property", term["schema"])
	}
	id := runIDOf(t, term)
	_, lines, raw = pgStream(t, c, pgPath(id, "input"), answerForm(term["turn_digest"].(string)))
	if term, _, _ = pgTerminal(t, lines, raw); term["type"] != "done" || term["answer"] != "thanks" {
		t.Errorf("terminal line = %v, want done with thanks", term)
	}
}

// TestPlaygroundDocument: without stream=1 a client that does not prefer
// HTML gets one JSON document with every step and the outcome.
func TestPlaygroundDocument(t *testing.T) {
	a := newApp(t, 0)
	c := a.signIn(t, "admin")
	for _, accept := range []string{"application/json", "", "*/*", "text/html;q=0.5, application/json"} {
		t.Run("Accept "+accept, func(t *testing.T) {
			prompt, order := pgPrompt(t, a)
			doc := pgDocument(t, c, "/playground/runs", url.Values{"configuration": {"refund"}, "prompt": {prompt}}, accept)
			out := doc.Outcome
			if out["type"] != "awaiting_approval" || out["turn_digest"] == "" {
				t.Fatalf("outcome = %v, want awaiting_approval with a digest", out)
			}
			if len(doc.Steps) == 0 || !strings.Contains(contents(t, doc.Steps), "MARKER-ARG") {
				t.Errorf("steps = %v, want every step with its content", doc.Steps)
			}
			id := runIDOf(t, out)
			doc = pgDocument(t, c, pgPath(id, "resume"), approve(out["turn_digest"].(string)), accept)
			if doc.Outcome["type"] != "done" || len(doc.Steps) == 0 {
				t.Errorf("after the approval: outcome %v with %d steps, want done", doc.Outcome, len(doc.Steps))
			}
			if n := a.Refunds(t, order); n != 1 {
				t.Errorf("refunds = %d, want 1", n)
			}
		})
	}
}

type pgDoc struct {
	Steps   []map[string]any `json:"steps"`
	Outcome map[string]any   `json:"outcome"`
}

func pgDocument(t *testing.T, c *client, path string, form url.Values, accept string) pgDoc {
	t.Helper()
	res, body := c.do(c.postRequest(path, form, accept))
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("POST %s: %d %s, want 200 JSON:\n%s", path, res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	var doc pgDoc
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("the document does not parse: %v\n%s", err, body)
	}
	if dec.More() {
		t.Errorf("more than one JSON document:\n%s", body)
	}
	for _, s := range doc.Steps {
		if s["content"] == nil || s["kind"] == nil {
			t.Errorf("step %v lacks its kind or content", s)
		}
	}
	return doc
}

var (
	pgResumeForm = `action="/playground/runs/%d/resume"`
	pgInputForm  = `action="/playground/runs/%d/input"`
)

// TestPlaygroundWithoutJavaScript: a browser's native post gets the
// playground page back with every step, the outcome and the form that
// resumes the run, and that form works natively too.
func TestPlaygroundWithoutJavaScript(t *testing.T) {
	a := newApp(t, 0)
	c := a.signIn(t, "admin")
	native := func(t *testing.T, path string, form url.Values) string {
		t.Helper()
		res, body := c.do(c.postRequest(path, form, browserAccept))
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("POST %s: %d %s, want a 200 page:\n%s", path, res.StatusCode, res.Header.Get("Content-Type"), body)
		}
		return html.UnescapeString(body)
	}

	t.Run("approval", func(t *testing.T) {
		prompt, order := pgPrompt(t, a)
		body := native(t, "/playground/runs", url.Values{"configuration": {"refund"}, "prompt": {prompt}})
		id := a.latestRun(t)
		digest := a.Run(t, id).TurnDigest
		for _, want := range []string{
			`data-testid="playground-step"`, "MARKER-TEXT", `data-event="awaiting_approval"`,
			`<code class="tool">refund_order</code>`, "MARKER-ARG", fmt.Sprintf(pgResumeForm, id),
			`name="turn_digest" value="` + digest + `"`, `name="decision" value="approve"`, `name="decision" value="deny"`,
			`<option value="refund" selected`, ">" + prompt + "</textarea>",
		} {
			if !strings.Contains(body, want) {
				t.Errorf("the result page has no %s:\n%s", want, body)
			}
		}
		body = native(t, pgPath(id, "resume"), approve(digest))
		if !strings.Contains(body, `data-event="done"`) || !strings.Contains(body, "MARKER-ANSWER") {
			t.Errorf("after the approval the page shows no answer:\n%s", body)
		}
		if n := a.Refunds(t, order); n != 1 {
			t.Errorf("refunds = %d, want 1", n)
		}
	})

	t.Run("four eyes", func(t *testing.T) {
		prompt, _ := pgPrompt(t, a)
		body := native(t, "/playground/runs", url.Values{"configuration": {"four-eyes"}, "prompt": {prompt}})
		id := a.latestRun(t)
		if !strings.Contains(body, `data-testid="four-eyes"`) || !strings.Contains(body, `<a href="/inbox">inbox</a>`) {
			t.Errorf("a four-eyes pause shows no link to the inbox:\n%s", body)
		}
		if strings.Contains(body, fmt.Sprintf(pgResumeForm, id)) {
			t.Errorf("a four-eyes pause offers the initiator the resume form")
		}
	})

	t.Run("input", func(t *testing.T) {
		body := native(t, "/playground/runs", url.Values{"configuration": {"input"}, "prompt": {"How much?"}})
		id := a.latestRun(t)
		for _, want := range []string{`data-event="awaiting_input"`, fmt.Sprintf(pgInputForm, id), `name="amount"`, `name="note"`} {
			if !strings.Contains(body, want) {
				t.Errorf("the input pause has no %s:\n%s", want, body)
			}
		}
		body = native(t, pgPath(id, "input"), answerForm(a.Run(t, id).TurnDigest))
		if !strings.Contains(body, `data-event="done"`) || !strings.Contains(body, "thanks") {
			t.Errorf("after the answer the page shows no answer:\n%s", body)
		}
	})
}

// latestRun is the id of the newest run.
func (a *testApp) latestRun(t *testing.T) int64 {
	t.Helper()
	var id int64
	if err := a.DB.Get(&id, `SELECT MAX(id) FROM runs`); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestPlaygroundRefusals: refusals write nothing. To a script (stream=1)
// or a client that does not prefer HTML they are JSON error bodies with
// the statuses of the refusal table; to a browser's native form post they
// are pages: a 303 back to the playground with a flash, the playground
// again with the input form's errors (422), or the 404 page.
func TestPlaygroundRefusals(t *testing.T) {
	a := newApp(t, 0)
	c := a.signIn(t, "admin")
	admin := func(cfg string) runtime.Outcome { return a.start(t, cfg, "admin", runtime.OriginInteractive) }

	tests := []struct {
		name       string
		setup      func(t *testing.T) (id int64, path string, form url.Values)
		wantStatus int
		wantCode   string
		// wantDigest is the current digest a stale_turn names; wantField a
		// field an invalid_input marks.
		wantDigest func(id int64) string
		wantField  string
	}{
		{name: "stale_turn", wantStatus: http.StatusConflict, wantCode: "stale_turn",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o := admin("twice")
				_, lines, raw := pgStream(t, c, pgPath(o.RunID, "resume"), approve(o.Digest))
				if term, _, _ := pgTerminal(t, lines, raw); term["type"] != "awaiting_approval" {
					t.Fatalf("after the first approval: %v", term)
				}
				return o.RunID, pgPath(o.RunID, "resume"), approve(o.Digest)
			},
			wantDigest: func(id int64) string { return a.Run(t, id).TurnDigest }},
		{name: "invalid_input: not a number", wantStatus: http.StatusUnprocessableEntity, wantCode: "invalid_input", wantField: "amount",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o := admin("input")
				f := answerForm(o.Digest)
				f.Set("amount", "lots")
				return o.RunID, pgPath(o.RunID, "input"), f
			}},
		{name: "invalid_input: missing", wantStatus: http.StatusUnprocessableEntity, wantCode: "invalid_input", wantField: "amount",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o := admin("input")
				return o.RunID, pgPath(o.RunID, "input"), url.Values{"turn_digest": {o.Digest}, "stream": {"1"}}
			}},
		{name: "four_eyes: the admin started it", wantStatus: http.StatusForbidden, wantCode: "four_eyes",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o := admin("four-eyes")
				return o.RunID, pgPath(o.RunID, "resume"), approve(o.Digest)
			}},
		{name: "not_waiting: cancelled", wantStatus: http.StatusConflict, wantCode: "not_waiting",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o := admin("refund")
				if _, err := a.Engine.Cancel(context.Background(), o.RunID, a.Users["admin"].Actor()); err != nil {
					t.Fatal(err)
				}
				return o.RunID, pgPath(o.RunID, "resume"), approve(o.Digest)
			}},
		{name: "not_waiting: approval of an input turn", wantStatus: http.StatusConflict, wantCode: "not_waiting",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o := admin("input")
				return o.RunID, pgPath(o.RunID, "resume"), approve(o.Digest)
			}},
		{name: "bad decision", wantStatus: http.StatusBadRequest, wantCode: "invalid_request",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o := admin("refund")
				return o.RunID, pgPath(o.RunID, "resume"), url.Values{"turn_digest": {o.Digest}, "decision": {"maybe"}}
			}},
		{name: "unknown run", wantStatus: http.StatusNotFound, wantCode: "not_found",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o := admin("refund")
				return o.RunID, pgPath(999999, "resume"), approve(o.Digest)
			}},
		{name: "unknown run: input", wantStatus: http.StatusNotFound, wantCode: "not_found",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o := admin("input")
				return o.RunID, pgPath(999999, "input"), answerForm(o.Digest)
			}},
		{name: "not_waiting: input of a cancelled run", wantStatus: http.StatusConflict, wantCode: "not_waiting",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o := admin("input")
				if _, err := a.Engine.Cancel(context.Background(), o.RunID, a.Users["admin"].Actor()); err != nil {
					t.Fatal(err)
				}
				f := answerForm(o.Digest)
				f.Set("amount", "lots")
				return o.RunID, pgPath(o.RunID, "input"), f
			}},
		{name: "malformed run id", wantStatus: http.StatusNotFound, wantCode: "not_found",
			setup: func(t *testing.T) (int64, string, url.Values) {
				o := admin("input")
				return o.RunID, "/playground/runs/abc/input", answerForm(o.Digest)
			}},
	}
	for _, tt := range tests {
		for _, accept := range []string{"", browserAccept} {
			t.Run(tt.name+"/Accept "+accept, func(t *testing.T) {
				id, path, form := tt.setup(t)
				before := a.State(t, id)
				res, body := c.do(c.postRequest(path, form, accept))
				a.Unchanged(t, id, before)
				if accept == browserAccept && form.Get("stream") != "1" {
					wantPlaygroundPage(t, c, res, body, tt.wantStatus, tt.wantField)
					return
				}
				var got struct {
					Error struct {
						Code       string            `json:"code"`
						Message    string            `json:"message"`
						TurnDigest string            `json:"turn_digest"`
						Fields     map[string]string `json:"fields"`
					} `json:"error"`
				}
				if res.StatusCode != tt.wantStatus || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
					t.Fatalf("answer = %d %s, want %d JSON:\n%s", res.StatusCode, res.Header.Get("Content-Type"), tt.wantStatus, body)
				}
				if err := json.Unmarshal([]byte(body), &got); err != nil {
					t.Fatalf("body is not JSON: %v\n%s", err, body)
				}
				if got.Error.Code != tt.wantCode || got.Error.Message == "" {
					t.Errorf("error = %+v, want code %s with a message", got.Error, tt.wantCode)
				}
				if tt.wantDigest != nil {
					if want := tt.wantDigest(id); got.Error.TurnDigest != want || want == form.Get("turn_digest") {
						t.Errorf("turn_digest = %q, want the current %q", got.Error.TurnDigest, want)
					}
				}
				if tt.wantField != "" && got.Error.Fields[tt.wantField] == "" {
					t.Errorf("fields = %v, want a message for %s", got.Error.Fields, tt.wantField)
				}
			})
		}
	}

	t.Run("start refusals", func(t *testing.T) {
		for _, tt := range []struct {
			form       url.Values
			wantStatus int
			wantCode   string
		}{
			{url.Values{"configuration": {"refund"}, "prompt": {"   "}}, http.StatusBadRequest, "invalid_request"},
			{url.Values{"configuration": {"no-such"}, "prompt": {"hello"}}, http.StatusNotFound, "not_found"},
		} {
			tt.form.Set("stream", "1")
			res, body := c.do(c.postRequest("/playground/runs", tt.form, browserAccept))
			if res.StatusCode != tt.wantStatus || !strings.Contains(body, `"code":"`+tt.wantCode+`"`) {
				t.Errorf("start %v = %d %s, want %d %s", tt.form, res.StatusCode, body, tt.wantStatus, tt.wantCode)
			}
		}
	})
}

// stopsWaitingAfterRefusal is the engine with a run that stops waiting
// right after the pipeline refused an answer to it as invalid_input:
// someone cancelled it before the form could be shown again.
type stopsWaitingAfterRefusal struct{ web.Engine }

func (e stopsWaitingAfterRefusal) SubmitInput(ctx context.Context, req runtime.InputRequest) (*runtime.Continuation, error) {
	c, err := e.Engine.SubmitInput(ctx, req)
	if runtime.CodeOf(err) == runtime.CodeInvalidInput {
		if _, cerr := e.Cancel(ctx, req.RunID, req.Actor); cerr != nil {
			return nil, cerr
		}
	}
	return c, err
}

// TestPlaygroundRefusedInputOfARunThatStoppedWaiting: the playground
// shows a refused answer's form again from the run's turn; when the run
// no longer waits by then, the native post is told what the refusal table
// says of a run that does not wait (a 303 back to the playground with a
// flash), not a 500.
func TestPlaygroundRefusedInputOfARunThatStoppedWaiting(t *testing.T) {
	a := newApp(t, 0, func(d *web.Deps) { d.Engine = stopsWaitingAfterRefusal{d.Engine} })
	c := a.signIn(t, "admin")
	o := a.start(t, "input", "admin", runtime.OriginInteractive)
	f := answerForm(o.Digest)
	f.Set("amount", "lots")
	res, body := c.do(c.postRequest(pgPath(o.RunID, "input"), f, browserAccept))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d, want 303 to the playground:\n%s", res.StatusCode, body)
	}
	wantRedirect(t, res, "/playground")
	_, page := c.get("/playground")
	want := fmt.Sprintf("Run %d no longer waits for this decision.", o.RunID)
	if m := flashText.FindStringSubmatch(page); m == nil || m[1] != want {
		t.Errorf("the playground's flash = %q, want %q", m, want)
	}
	if st := a.Run(t, o.RunID).Status; st != runtime.StatusCancelled {
		t.Errorf("run is %s, want cancelled", st)
	}
}

// wantPlaygroundPage checks a refusal answered to a native form post: the
// page a refusal with that JSON status gets.
func wantPlaygroundPage(t *testing.T, c *client, res *http.Response, body string, jsonStatus int, field string) {
	t.Helper()
	switch jsonStatus {
	case http.StatusNotFound:
		wantErrorPage(t, res, body, http.StatusNotFound, "Not found")
	case http.StatusUnprocessableEntity:
		if res.StatusCode != jsonStatus || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("answer = %d %s, want the playground page with 422:\n%s", res.StatusCode, res.Header.Get("Content-Type"), body)
		}
		for _, want := range []string{`data-event="awaiting_input"`, `name="` + field + `"`, "Some fields need another look."} {
			if !strings.Contains(body, want) {
				t.Errorf("the 422 page has no %s:\n%s", want, body)
			}
		}
	default:
		wantRedirect(t, res, "/playground")
		_, page := c.get("/playground")
		if m := flashText.FindStringSubmatch(page); m == nil || m[1] == "" {
			t.Errorf("the playground after the 303 shows no flash:\n%s", page)
		}
	}
}

// TestPlaygroundKeepalives: a silent tool call after the approval is kept
// alive by keepalive lines, and the stream still ends with one terminal
// line.
func TestPlaygroundKeepalives(t *testing.T) {
	a := newApp(t, 500*time.Millisecond)
	c := a.signIn(t, "admin")
	prompt, order := pgPrompt(t, a)
	_, lines, raw := pgStream(t, c, "/playground/runs", url.Values{"configuration": {"silent"}, "prompt": {prompt}})
	term, _, _ := pgTerminal(t, lines, raw)
	if term["type"] != "awaiting_approval" {
		t.Fatalf("terminal line = %v, want awaiting_approval", term)
	}
	_, lines, raw = pgStream(t, c, pgPath(runIDOf(t, term), "resume"), approve(term["turn_digest"].(string)))
	term, steps, keepalives := pgTerminal(t, lines, raw)
	if keepalives < 3 {
		t.Errorf("%d keepalives over a 2.5 s silent call at 500 ms, want at least 3:\n%s", keepalives, strings.Join(raw, "\n"))
	}
	for _, l := range raw {
		if strings.Contains(l, "keepalive") && l != `{"type":"keepalive","turn":1}` {
			t.Errorf("keepalive line = %s", l)
		}
	}
	if !strings.Contains(contents(t, steps), "MARKER-SILENT") {
		t.Errorf("the silent call's step does not show its arguments")
	}
	if term["type"] != "done" {
		t.Errorf("terminal line = %v, want done", term)
	}
	if n := a.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
}

// openPlayground signs an admin in and opens the playground.
func openPlayground(t *testing.T, a *testApp, js bool) *tab {
	t.Helper()
	b := openTab(t, a, js)
	b.signIn("admin")
	b.do("open the playground", stepTimeout,
		chromedp.Navigate(b.base+"/playground"),
		chromedp.WaitVisible(chromedp.CSS(`form[data-playground="start"]`)),
		loaded())
	return b
}

// startInBrowser picks a configuration, types a prompt and presses Run.
func (b *tab) startInBrowser(cfg, prompt string) {
	b.t.Helper()
	b.do("start a run of "+cfg, stepTimeout,
		chromedp.SetValue(chromedp.CSS(`#playground-configuration`), cfg),
		chromedp.SendKeys(chromedp.CSS(`#playground-prompt`), prompt),
		chromedp.Click(chromedp.CSS(`form[data-playground="start"] button[type="submit"]`)))
}

const outcomeSel = `[data-testid="playground-outcome"]`

// TestBrowserPlaygroundStreamsAndResumesInPlace: with JavaScript the run's
// steps appear on the playground page itself, the pause shows its call
// and an Approve button, and approving continues the run on the same page.
func TestBrowserPlaygroundStreamsAndResumesInPlace(t *testing.T) {
	a := newApp(t, 0)
	prompt, order := pgPrompt(t, a)
	b := openPlayground(t, a, true)

	b.startInBrowser("refund", prompt)
	b.do("wait for the pause", settleTimeout, chromedp.WaitVisible(chromedp.CSS(outcomeSel+`[data-event="awaiting_approval"] button[value="approve"]`)))
	steps := get(b, "read the steps", chromedp.Text(chromedp.CSS(`[data-testid="playground-steps"]`)))
	for _, want := range []string{"MARKER-TEXT", "MARKER-ARG", "llm", "tool"} {
		if !strings.Contains(steps, want) {
			t.Errorf("the steps shown lack %s:\n%s", want, steps)
		}
	}
	if calls := get(b, "read the pending call", chromedp.Text(chromedp.CSS(outcomeSel+` [data-testid="call"]`))); !strings.Contains(calls, "refund_order") || !strings.Contains(calls, order) {
		t.Errorf("pending call shown = %q, want refund_order of %s", calls, order)
	}
	id := a.latestRun(t)
	countSteps := chromedp.Evaluate[int](`document.querySelectorAll('[data-testid="playground-step"]').length`)
	shown := get(b, "count the steps", countSteps)

	b.do("approve in place", settleTimeout,
		chromedp.Click(chromedp.CSS(outcomeSel+` button[value="approve"]`)),
		chromedp.WaitVisible(chromedp.CSS(outcomeSel+`[data-event="done"]`)))
	if answer := get(b, "read the answer", chromedp.Text(chromedp.CSS(`[data-testid="playground-answer"]`))); !strings.Contains(answer, "MARKER-ANSWER") {
		t.Errorf("answer = %q", answer)
	}
	if n := get(b, "count the steps", countSteps); n <= shown {
		t.Errorf("%d steps after the approval, want more than the %d before: the continuation appends", n, shown)
	}
	b.wantAt("/playground")
	for path, want := range map[string]int{"/playground/runs": 1, pgPath(id, "resume"): 1} {
		posts := b.posts(path)
		if len(posts) != want || posts[0].kind != network.ResourceTypeFetch || posts[0].status != 200 {
			t.Errorf("POST %s = %+v, want one fetch answered 200", path, posts)
		}
	}
	wantSettled(t, a, id, order)
}

// TestBrowserPlaygroundInputForm: the script builds the input form from
// the schema; a refused answer shows its field error in place, a good one
// finishes the run.
func TestBrowserPlaygroundInputForm(t *testing.T) {
	a := newApp(t, 0)
	b := openPlayground(t, a, true)
	b.startInBrowser("input", "How much?")
	form := outcomeSel + `[data-event="awaiting_input"] form[data-playground="input"]`
	b.do("wait for the input form", settleTimeout, chromedp.WaitVisible(chromedp.CSS(form+` input[name="amount"][type="number"]`)))
	id := a.latestRun(t)

	b.do("send an amount of 0", stepTimeout,
		chromedp.SendKeys(chromedp.CSS(form+` input[name="amount"]`), "0"),
		chromedp.SendKeys(chromedp.CSS(form+` input[name="note"]`), "keep-me"),
		chromedp.SetAttributeValue(chromedp.CSS(form), "novalidate", ""),
		chromedp.Click(chromedp.CSS(form+` button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(form+` [data-testid="field-error"][data-field="amount"]`)))
	if got := a.Run(t, id).Status; got != runtime.StatusWaitingForInput {
		t.Errorf("after the refusal the run is %s", got)
	}

	b.do("send an amount of 250", settleTimeout,
		chromedp.Clear(chromedp.CSS(form+` input[name="amount"]`)),
		chromedp.SendKeys(chromedp.CSS(form+` input[name="amount"]`), "250"),
		chromedp.Click(chromedp.CSS(form+` button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(outcomeSel+`[data-event="done"]`)))
	wantAnswer(t, a, id)
}

// TestBrowserPlaygroundWithoutJavaScript: without scripts the same forms
// post natively and the result page carries the run on.
func TestBrowserPlaygroundWithoutJavaScript(t *testing.T) {
	a := newApp(t, 0)
	prompt, order := pgPrompt(t, a)
	b := openPlayground(t, a, false)
	b.startInBrowser("refund", prompt)
	b.do("wait for the result page", settleTimeout, chromedp.WaitVisible(chromedp.CSS(outcomeSel+`[data-event="awaiting_approval"] button[value="approve"]`)))
	id := a.latestRun(t)
	b.do("approve natively", settleTimeout,
		chromedp.Click(chromedp.CSS(outcomeSel+` button[value="approve"]`)),
		chromedp.WaitVisible(chromedp.CSS(outcomeSel+`[data-event="done"]`)))
	b.wantAt(pgPath(id, "resume"))
	if posts := b.posts(pgPath(id, "resume")); len(posts) != 1 || posts[0].kind != network.ResourceTypeDocument || posts[0].status != 200 {
		t.Errorf("resume requests = %+v, want one native POST answered 200", posts)
	}
	wantSettled(t, a, id, order)
}

// TestPlaygroundBusy: a playground continuation holds one of the
// --max-continuations slots; with none free the playground answers 503
// with Retry-After and starts nothing.
func TestPlaygroundBusy(t *testing.T) {
	a := newApp(t, 0)
	sessions := scs.New()
	sessions.Store = mysqlstore.NewWithCleanupInterval(a.DB.DB, 0)
	srv := httptest.NewServer(web.New(web.Deps{Logger: slog.New(slog.DiscardHandler), Ready: a.Store, Engine: a.Engine,
		Users: a.Store, Catalog: a.Store, Events: a.Engine, Sessions: sessions, MaxContinuations: 1}).Handler())
	t.Cleanup(srv.Close)
	one := *a
	one.srv = srv
	c := one.signIn(t, "admin")

	paused := a.start(t, "crawl", "admin", runtime.OriginInteractive)
	form := approve(paused.Digest)
	form.Set("stream", "1")
	res, err := c.http.Do(c.postRequest(pgPath(paused.RunID, "resume"), form, ""))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the first continuation: status %d", res.StatusCode)
	}

	var before int
	if err := a.DB.Get(&before, `SELECT COUNT(*) FROM runs`); err != nil {
		t.Fatal(err)
	}
	busy, body := c.post("/playground/runs", url.Values{"configuration": {"refund"}, "prompt": {"Refund X-1"}, "stream": {"1"}})
	if busy.StatusCode != http.StatusServiceUnavailable || busy.Header.Get("Retry-After") == "" || !strings.Contains(body, `"code":"busy"`) {
		t.Errorf("a start with every slot taken = %d (Retry-After %q) %s, want 503 busy", busy.StatusCode, busy.Header.Get("Retry-After"), body)
	}
	var after int
	if err := a.DB.Get(&after, `SELECT COUNT(*) FROM runs`); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("a refused start created %d runs", after-before)
	}

	rest, err := io.ReadAll(res.Body)
	if err != nil || !strings.Contains(string(rest), `"type":"done"`) {
		t.Fatalf("the first continuation ended with %v:\n%s", err, rest)
	}
	if res, _, _ := pgStream(t, c, "/playground/runs", url.Values{"configuration": {"input"}, "prompt": {"How much?"}}); res.StatusCode != http.StatusOK {
		t.Errorf("after the first continuation ended a start got %d", res.StatusCode)
	}
}
