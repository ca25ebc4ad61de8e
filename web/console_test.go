package web_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
	"github.com/turnstile-dev/turnstile/web"
)

var inboxNext = regexp.MustCompile(`href="([^"]+)" data-testid="inbox-next"`)

// TestInboxPagesReachEveryRun: 50 runs a page, oldest first, the total on
// every page, a next link while more wait, the filters kept on it; no
// waiting run is out of reach, and the inbox never reloads itself.
func TestInboxPagesReachEveryRun(t *testing.T) {
	a := newApp(t, 0)
	var want []int64
	for i := range 53 {
		cfg := "refund"
		if i%10 == 9 {
			cfg = "input"
		}
		o, _ := a.Waiting(t, cfg)
		want = append(want, o.RunID)
	}
	c := a.signIn(t, "approver")
	var got []int64
	path := "/inbox"
	for pages := 0; path != ""; pages++ {
		res, body := c.get(path)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d", path, res.StatusCode)
		}
		if !strings.Contains(body, "53 runs wait for a decision") {
			t.Errorf("page %d does not say 53 wait", pages)
		}
		if strings.Contains(body, `http-equiv="refresh"`) {
			t.Errorf("page %d reloads itself", pages)
		}
		ids := inboxRuns(t, body)
		if pages == 0 && len(ids) != 50 {
			t.Errorf("the first page shows %d runs, want 50", len(ids))
		}
		got = append(got, ids...)
		path = ""
		if m := inboxNext.FindStringSubmatch(body); m != nil {
			path = html.UnescapeString(m[1])
		}
		if pages > 3 {
			t.Fatal("the pages do not end")
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("runs over all pages = %v, want %v", got, want)
	}

	_, body := c.get("/inbox?tool=ask_operator")
	if ids := inboxRuns(t, body); len(ids) != 5 || !strings.Contains(body, "5 runs wait") {
		t.Errorf("filtered by tool: %d runs, want the 5 input runs", len(ids))
	}
	_, body = c.get("/inbox?configuration=input")
	if ids := inboxRuns(t, body); len(ids) != 5 {
		t.Errorf("filtered by configuration: %d runs, want 5", len(ids))
	}
	_, body = c.get("/inbox?configuration=no-such-agent")
	if ids := inboxRuns(t, body); len(ids) != 0 || !strings.Contains(body, `data-testid="inbox-empty"`) {
		t.Errorf("filtered by an unknown configuration: %d runs, want none", len(ids))
	}
	if res, _ := c.get("/inbox?before=made-up"); res.StatusCode != http.StatusBadRequest {
		t.Errorf("a made-up cursor = %d, want 400", res.StatusCode)
	}
}

// TestInboxCardGivesContext: the card says who started the run, shows the
// tool's description, the preview of what the call would do and the
// arguments as a table; the prompt and what the model said only to who may
// read the run.
func TestInboxCardGivesContext(t *testing.T) {
	a := newApp(t, 0)
	o, order := a.Waiting(t, "refund")
	for _, tt := range []struct {
		user        string
		wantContext bool
	}{{"owner", true}, {"admin", true}, {"approver", false}} {
		t.Run(tt.user, func(t *testing.T) {
			_, body := a.signIn(t, tt.user).get("/inbox")
			card := html.UnescapeString(inboxCard(t, body, o.RunID))
			for _, want := range []string{
				`data-testid="run-owner">owner<`,
				`data-testid="tool-description">Refund an order`,
				`data-testid="preview">Refund 42.00 EUR of ` + order + ` to MARKER-CUSTOMER (MARKER-ARG)<`,
				`<th scope="row">order_id</th><td>` + order + `</td>`,
				`data-testid="raw-arguments"`,
			} {
				if !strings.Contains(card, want) {
					t.Errorf("the card has no %s:\n%s", want, card)
				}
			}
			if got := strings.Contains(card, `data-testid="run-prompt">Refund `+order); got != tt.wantContext {
				t.Errorf("the card shows the prompt: %v, want %v", got, tt.wantContext)
			}
		})
	}
	_, body := a.signIn(t, "approver").get("/inbox")
	if strings.Contains(body, "MARKER-TEXT") {
		t.Error("an approver alone reads what the model said")
	}
}

// TestInboxRunPage: GET /inbox/runs/:id is one waiting run with its forms
// for who may decide it, and the 404 page for anyone else; after a
// durable decision without JavaScript it is where the decider lands, and
// it says what the decision did and how the run ended, reloading itself
// (without a form) until then.
func TestInboxRunPage(t *testing.T) {
	a := newApp(t, 0, func(d *web.Deps) { d.DecisionPath = web.PathDurable })
	o, _ := a.Waiting(t, "refund")
	path := fmt.Sprintf("/inbox/runs/%d", o.RunID)
	if res, body := a.signIn(t, "other").get(path); res.StatusCode != http.StatusNotFound {
		t.Errorf("a stranger gets %d, want 404:\n%s", res.StatusCode, body)
	}
	c := a.signIn(t, "approver")
	_, body := c.get(path)
	if ids := inboxRuns(t, body); !slices.Equal(ids, []int64{o.RunID}) || !strings.Contains(body, `name="turn_digest"`) {
		t.Fatalf("the decider's page shows runs %v, want run %d with its form", ids, o.RunID)
	}
	f := approve(o.Digest)
	f.Set("decision", "deny")
	res, _ := c.post(inboxPath(o.RunID, "decision"), f)
	wantRedirect(t, res, path)
	_, body = c.get(path)
	if !strings.Contains(body, `http-equiv="refresh"`) || strings.Contains(body, "<form method=\"post\" action=\"/inbox") ||
		!strings.Contains(body, fmt.Sprintf("You denied refund_order; run %d continues", o.RunID)) {
		t.Errorf("while a worker has not carried it out, the page = %s", body)
	}
	testrig.Work(t, a.Engine, 1, 10*time.Millisecond)
	a.WaitStatus(t, o.RunID, runtime.StatusCompleted, 10*time.Second)
	_, body = c.get(path)
	if strings.Contains(body, `http-equiv="refresh"`) ||
		!strings.Contains(html.UnescapeString(body), fmt.Sprintf("You denied refund_order; run %d completed: the agent finished.", o.RunID)) {
		t.Errorf("once settled, the page = %s", body)
	}
	// Someone who decided nothing about it hears only that it waits no more.
	_, body = a.signIn(t, "admin").get(path)
	if !strings.Contains(body, "no longer waits") {
		t.Errorf("to another decider the settled run's page = %s", body)
	}
}

// TestRunHistory: GET /runs lists what the user may see, newest first, a
// page at a time: the owner's runs in full, the runs a decider decided
// with only their decision; the header links to it.
func TestRunHistory(t *testing.T) {
	a := newApp(t, 0)
	var ids []int64
	for range 52 {
		o, _ := a.Waiting(t, "refund")
		ids = append(ids, o.RunID)
	}
	decided := ids[0]
	a.Decide(t, runtime.DecideRequest{RunID: decided, Digest: a.Run(t, decided).TurnDigest, Decision: runtime.DecisionDeny})

	owner := a.signIn(t, "owner")
	_, body := owner.get("/inbox")
	if !strings.Contains(body, `href="/runs" data-testid="nav-runs"`) {
		t.Error("the header has no link to the runs")
	}
	row := regexp.MustCompile(`data-testid="history-run" data-run-id="([0-9]+)"`)
	_, body = owner.get("/runs")
	first := row.FindAllStringSubmatch(body, -1)
	if len(first) != 50 || first[0][1] != itoa(ids[51]) {
		t.Fatalf("the first page lists %d runs starting with %v, want 50 newest first", len(first), first[:min(1, len(first))])
	}
	m := regexp.MustCompile(`href="([^"]+)" data-testid="history-next"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no link to the next page")
	}
	_, body = owner.get(html.UnescapeString(m[1]))
	if second := row.FindAllStringSubmatch(body, -1); len(second) != 2 || second[1][1] != itoa(ids[0]) {
		t.Errorf("the second page lists %v, want the 2 oldest", second)
	}

	approver := a.signIn(t, "approver")
	_, body = approver.get("/runs")
	rows := row.FindAllStringSubmatch(body, -1)
	if len(rows) != 1 || rows[0][1] != itoa(decided) || !strings.Contains(body, "denied") ||
		strings.Contains(body, fmt.Sprintf(`href="/runs/%d"`, decided)) || strings.Contains(body, "by owner") {
		t.Errorf("the decider's history = %v:\n%s", rows, body)
	}
	if res, _ := approver.get("/runs?status=bogus"); res.StatusCode != http.StatusSeeOther {
		t.Errorf("a bad filter = %d, want 303 back with a flash", res.StatusCode)
	}
	_, body = a.signIn(t, "admin").get("/runs?status=completed")
	if rows := row.FindAllStringSubmatch(body, -1); len(rows) != 1 {
		t.Errorf("admin, completed runs: %d, want 1", len(rows))
	}
}

// TestAPIListsPage: GET /api/approvals and GET /api/runs page with limit
// and a cursor, and reach every run.
func TestAPIListsPage(t *testing.T) {
	a := newApp(t, 0)
	var ids []int64
	for range 5 {
		o, _ := a.Waiting(t, "refund")
		ids = append(ids, o.RunID)
	}
	approver := a.bearer(t, "approver", "run:read")
	var got []int64
	path := "/api/approvals?limit=2"
	for path != "" {
		body := approver.call(t, a, http.MethodGet, path, "", nil).wantKeys(t, http.StatusOK, "approvals", "next", "total")
		if body["total"] != float64(5) {
			t.Errorf("total = %v, want 5", body["total"])
		}
		for _, ap := range body["approvals"].([]any) {
			m := ap.(map[string]any)
			got = append(got, int64(m["run_id"].(float64)))
			if pv, _ := m["previews"].(map[string]any); len(pv) != 1 {
				t.Errorf("approval %v has no preview", m["run_id"])
			}
		}
		path = ""
		if n, ok := body["next"].(string); ok {
			path = "/api/approvals?limit=2&after=" + url.QueryEscape(n)
		}
	}
	if !slices.Equal(got, ids) {
		t.Errorf("approvals over all pages = %v, want %v", got, ids)
	}
	approver.call(t, a, http.MethodGet, "/api/approvals?limit=501", "", nil).wantError(t, http.StatusBadRequest, "invalid_request")

	owner := a.bearer(t, "owner", "run:read")
	body := owner.call(t, a, http.MethodGet, "/api/runs?limit=3", "", nil).wantKeys(t, http.StatusOK, "runs", "next")
	runs := body["runs"].([]any)
	if len(runs) != 3 || runs[0].(map[string]any)["run"] == nil || body["next"] == nil {
		t.Errorf("the owner's first page = %v", body)
	}
	next := body["next"].(string)
	body = owner.call(t, a, http.MethodGet, "/api/runs?limit=3&before="+next, "", nil).wantKeys(t, http.StatusOK, "runs", "next")
	if len(body["runs"].([]any)) != 2 || body["next"] != nil {
		t.Errorf("the owner's second page = %v", body)
	}
	owner.call(t, a, http.MethodGet, "/api/runs?owner=admin", "", nil).wantError(t, http.StatusBadRequest, "invalid_request")
}

// TestProgressSaysWhatRuns: to the run's owner the inbox stream names the
// tool that runs and for how long, in its progress and keepalive lines; to
// a decider who holds the approve grant alone it counts steps and nothing
// else.
func TestProgressSaysWhatRuns(t *testing.T) {
	a := newApp(t, 500*time.Millisecond)
	for _, tt := range []struct {
		user     string
		wantTool bool
	}{{"owner", true}, {"approver", false}} {
		t.Run(tt.user, func(t *testing.T) {
			paused, _ := a.Waiting(t, "silent")
			_, lines, raw := streamLines(t, a.signIn(t, tt.user), inboxPath(paused.RunID, "decision"), approve(paused.Digest))
			var started, kept bool
			for i, l := range lines {
				tool, _ := l["tool"].(string)
				if tool != "" && !tt.wantTool {
					t.Errorf("line %s names a tool to a decider who may not read the run", raw[i])
				}
				if tool == "slow_task" && l["type"] == "progress" {
					started = true
				}
				if ms, _ := l["tool_ms"].(float64); tool == "slow_task" && l["type"] == "keepalive" && ms >= 400 {
					kept = true
				}
			}
			if tt.wantTool && (!started || !kept) {
				t.Errorf("the owner's stream: a start line %v, a keepalive with the time %v; want both:\n%s", started, kept, strings.Join(raw, "\n"))
			}
		})
	}
}
