package web_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/html"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/seal"
	"github.com/turnstile-dev/turnstile/store"
)

// erasableYAML keeps content in every place a run can: at the full
// privacy level its events carry it, its notifications go to the outbox,
// it asks for input, then for an approval that the test edits. The
// scripted model's texts are the configuration's, so each tag has a
// configuration of its own ("erasable-" and the tag, in lower case), and
// each run's copies are its own.
func erasableYAML(tag string) string {
	return strings.NewReplacer("TAG", tag, "IDENT", strings.ToLower(tag)).Replace(`
identifier: erasable-IDENT
name: Erasable TAG
privacy_level: full
provider:
  type: scripted
  script:
    rounds:
      - text: "MARK-ERASE-TEXT-TAG"
        tool_calls: [{name: ask_operator, arguments: {question: "MARK-ERASE-QUESTION-TAG"}}]
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}", reason: "MARK-ERASE-ARG-TAG"}}]
      - text: "MARK-ERASE-ANSWER-TAG"
tools: [ask_operator, refund_order]
notify:
  - url: https://hooks.example.com/erase
`)
}

// erasable is a run of erasableYAML taken to its end through the API,
// and the markers of every piece of its content.
type erasable struct {
	id      int64
	order   string
	markers map[string]string // by what they mark
}

// settleErasable starts a run of erasableYAML(tag) as owner, answers its input
// turn and approves its refund with edited arguments as approver, all
// with markers of tag, and returns it completed.
func settleErasable(t *testing.T, a *testApp, tag string) erasable {
	t.Helper()
	order := a.Order(t)
	e := erasable{order: order, markers: map[string]string{
		"prompt":          "MARK-ERASE-PROMPT-" + tag,
		"input":           "MARK-ERASE-INPUT-" + tag,
		"approval reason": "MARK-ERASE-REASON-" + tag,
		"edited argument": "MARK-ERASE-EDIT-" + tag,
		"model text":      "MARK-ERASE-TEXT-" + tag,
		"model question":  "MARK-ERASE-QUESTION-" + tag,
		"model argument":  "MARK-ERASE-ARG-" + tag,
		"answer":          "MARK-ERASE-ANSWER-" + tag,
	}}
	owner := a.bearer(t, "owner", runtime.ScopeRunStart)
	started := owner.call(t, a, http.MethodPost, "/api/runs",
		jsonBody(t, map[string]any{"configuration": "erasable-" + strings.ToLower(tag), "prompt": "Refund " + order + " " + e.markers["prompt"]}), nil).
		wantKeys(t, http.StatusCreated, "run")
	run := started["run"].(map[string]any)
	e.id = int64(run["id"].(float64))
	if run["status"] != string(runtime.StatusWaitingForInput) {
		t.Fatalf("run %d is %v, want it waiting for input", e.id, run["status"])
	}
	approver := a.bearer(t, "approver", runtime.ScopeRunDecide)
	answered := approver.call(t, a, http.MethodPost, runPathAPI(e.id, "/input"), jsonBody(t, map[string]any{
		"turn_digest": run["turn_digest"], "input": map[string]any{"amount": 4200, "note": e.markers["input"]}}), nil).
		wantKeys(t, http.StatusOK, "outcome")
	out := answered["outcome"].(map[string]any)
	calls, _ := out["pending_calls"].([]any)
	if out["type"] != "awaiting_approval" || len(calls) != 1 {
		t.Fatalf("run %d after its input: %v, want it waiting for one approval", e.id, out)
	}
	call := calls[0].(map[string]any)["id"].(string)
	approver.call(t, a, http.MethodPost, runPathAPI(e.id, "/decisions"), jsonBody(t, map[string]any{
		"turn_digest": out["turn_digest"], "decision": "approve", "reason": e.markers["approval reason"],
		"arguments": map[string]any{call: map[string]any{"order_id": order, "reason": e.markers["edited argument"]}}}), nil).
		wantKeys(t, http.StatusOK, "outcome")
	if got := a.Run(t, e.id).Status; got != runtime.StatusCompleted {
		t.Fatalf("run %d is %s after the approval, want it completed", e.id, got)
	}
	return e
}

// TestEraseRemovesEveryCopy is the erase's proof: two runs carry markers
// in their prompt, answer, the model's text and arguments, the input
// answered, the reasons and the edited arguments of their decisions (and
// so in the state, the transcript, the event payloads and the outbox);
// the owner erases one through the API; then every column of every table
// is searched for its markers (as bytes, and as hex), and, with state
// keys set, every sealed value opened and searched too. None of the
// erased run's is found; every one of the other run's is, so the search
// could fail. The erased run's row stays with erased_at and erased_by, its
// decisions with who decided what and when, its events' kinds; its
// delivered notification keeps its row without its body. With keys set a
// reseal of every sealed table is handed nothing of the erased run and
// finds nothing it cannot open.
func TestEraseRemovesEveryCopy(t *testing.T) {
	const goneTag, keptTag = "GONE-7f3a", "KEPT-2b9c"
	keys, err := seal.Parse("A:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xA1}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		sealer runtime.Sealer
	}{{"plain", nil}, {"sealed", keys}} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAppWith(t, 0, appEngine{configs: []string{erasableYAML(goneTag), erasableYAML(keptTag)}, sealer: tc.sealer})
			gone := settleErasable(t, a, goneTag)
			kept := settleErasable(t, a, keptTag)
			events := a.Count(t, `SELECT COUNT(*) FROM run_events WHERE run_id = ?`, gone.id)
			// One notification was delivered before the erase: its row is
			// kept, its body emptied; the pending ones are never sent.
			if _, err := a.DB.Exec(`UPDATE webhook_deliveries SET status = 'delivered', delivered_at = NOW(6)
				WHERE run_id = ? ORDER BY id LIMIT 1`, gone.id); err != nil {
				t.Fatal(err)
			}
			for _, e := range []erasable{gone, kept} {
				for what, m := range e.markers {
					if places := markerPlaces(t, a, tc.sealer, m); len(places) == 0 {
						t.Fatalf("before the erase, the %s of run %d (%q) is nowhere: the search cannot find it", what, e.id, m)
					}
				}
			}

			res := a.bearer(t, "owner", runtime.ScopeRunCancel).call(t, a, http.MethodDelete, runPathAPI(gone.id, "?erase=true"), "", nil)
			got := res.wantKeys(t, http.StatusOK, "id", "erased", "erased_at")
			if got["id"] != float64(gone.id) || got["erased"] != true {
				t.Errorf("erase answered %s", res.body)
			}

			for what, m := range gone.markers {
				if places := markerPlaces(t, a, tc.sealer, m); len(places) > 0 {
					t.Errorf("after the erase, the %s of run %d (%q) is still in %v", what, gone.id, m, places)
				}
			}
			for what, m := range kept.markers {
				if places := markerPlaces(t, a, tc.sealer, m); len(places) == 0 {
					t.Errorf("the erase of run %d took the %s of run %d (%q) too", gone.id, what, kept.id, m)
				}
			}

			var row struct {
				Status   string `db:"status"`
				ErasedBy *int64 `db:"erased_by"`
				Erased   bool   `db:"erased"`
				Prompt   []byte `db:"prompt"`
				State    []byte `db:"state"`
			}
			if err := a.DB.Get(&row, `SELECT status, erased_by, erased_at IS NOT NULL AS erased, prompt, state
				FROM runs WHERE id = ?`, gone.id); err != nil {
				t.Fatalf("the erased run's row: %v", err)
			}
			if row.Status != "completed" || !row.Erased || row.ErasedBy == nil || *row.ErasedBy != a.Users["owner"].ID ||
				len(row.Prompt) != 0 || len(row.State) != 0 {
				t.Errorf("the erased run's row = status %s, erased %v by %v, prompt %d bytes, state %d bytes; want completed, erased by the owner, empty",
					row.Status, row.Erased, row.ErasedBy, len(row.Prompt), len(row.State))
			}
			var decisions []struct {
				Kind      string `db:"kind"`
				DecidedBy int64  `db:"decided_by"`
				Decided   bool   `db:"decided"`
				Empty     bool   `db:"empty"`
			}
			if err := a.DB.Select(&decisions, `SELECT kind, decided_by, decided_at IS NOT NULL AS decided,
					reason = '' AND input IS NULL AND arguments IS NULL AS empty
				FROM decisions WHERE run_id = ? ORDER BY id`, gone.id); err != nil {
				t.Fatal(err)
			}
			if len(decisions) != 2 {
				t.Fatalf("the erased run has %d decisions, want its 2 kept", len(decisions))
			}
			for i, d := range decisions {
				if d.DecidedBy != a.Users["approver"].ID || !d.Decided || !d.Empty {
					t.Errorf("decision %d = %+v, want the approver's, with its time, and no content", i, d)
				}
			}
			if got := a.Count(t, `SELECT COUNT(*) FROM run_events WHERE run_id = ? AND payload = ''`, gone.id); got != events || events == 0 {
				t.Errorf("%d of the erased run's %d events are kept without their payload, want all", got, events)
			}
			if n := a.Count(t, `SELECT COUNT(*) FROM run_messages WHERE run_id = ?`, gone.id); n != 0 {
				t.Errorf("the erased run keeps %d transcript messages", n)
			}
			if n := a.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE run_id = ?`, gone.id); n != 1 {
				t.Errorf("the erased run keeps %d notifications, want the delivered one only", n)
			}
			if n := a.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE run_id = ? AND body = ''`, gone.id); n != 1 {
				t.Errorf("the erased run's delivered notification keeps its body")
			}

			if tc.sealer != nil {
				for _, table := range store.SealedTables() {
					var after store.ResealCursor
					for {
						b, err := a.Store.Reseal(t.Context(), table, after, 100, []byte("\x00none"), func(at runtime.Place, v []byte) ([]byte, error) {
							if at.RunID == gone.id {
								t.Errorf("reseal of %s is handed a value of the erased run %d at %v", table, gone.id, at)
							}
							_, err := tc.sealer.Open(v, at)
							return nil, err
						})
						if err != nil {
							t.Fatalf("reseal of %s after the erase: %v", table, err)
						}
						if b.Rows < 100 {
							break
						}
						after = b.Next
					}
				}
			}
		})
	}
}

// markerPlaces returns every "table.column" of the test database that
// holds marker: in any column of a text, binary or JSON type, cast to
// bytes, or in its hex; with a sealer, also in any sealed value that opens.
// The one column left out is the configurations' definition, which holds
// the scripted model's texts as the agent's own.
func markerPlaces(t *testing.T, a *testApp, sealer runtime.Sealer, marker string) []string {
	t.Helper()
	var cols []struct {
		Table  string `db:"table_name"`
		Column string `db:"column_name"`
	}
	if err := a.DB.Select(&cols, `SELECT table_name AS table_name, column_name AS column_name FROM information_schema.columns
		WHERE table_schema = DATABASE() AND data_type IN ('char', 'varchar', 'tinytext', 'text', 'mediumtext', 'longtext',
			'binary', 'varbinary', 'tinyblob', 'blob', 'mediumblob', 'longblob', 'json', 'enum', 'set')
		ORDER BY table_name, column_name`); err != nil {
		t.Fatal(err)
	}
	if len(cols) < 20 {
		t.Fatalf("information_schema lists %d text columns: not the test database's", len(cols))
	}
	var places []string
	for _, c := range cols {
		if c.Table == "configurations" && c.Column == "definition" {
			// The scripted model's words are the configuration's script:
			// the agent, which no erase of one of its runs touches. Every
			// copy of them in a run is searched.
			continue
		}
		q := fmt.Sprintf("SELECT COUNT(*) FROM `%s` WHERE INSTR(CAST(`%s` AS BINARY), CAST(? AS BINARY)) > 0 OR INSTR(HEX(`%s`), HEX(?)) > 0",
			c.Table, c.Column, c.Column)
		if a.Count(t, q, marker, marker) > 0 {
			places = append(places, c.Table+"."+c.Column)
		}
	}
	if sealer == nil {
		return places
	}
	for _, table := range store.SealedTables() {
		var after store.ResealCursor
		for {
			b, err := a.Store.Reseal(t.Context(), table, after, 100, []byte("\x00none"), func(at runtime.Place, v []byte) ([]byte, error) {
				if plain, err := sealer.Open(v, at); err == nil && strings.Contains(string(plain), marker) {
					places = append(places, fmt.Sprintf("%s (sealed, at %v)", table, at))
				}
				return nil, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if b.Rows < 100 {
				break
			}
			after = b.Next
		}
	}
	return places
}

// TestErasedRunAnswersAsMissing: once erased, every route that names the
// run answers its owner, an admin and the person who decided it exactly
// as a run that does not exist (erasing it again too), and nothing is
// written; only the history still lists it, as "erased", with nothing of
// its content and no link.
func TestErasedRunAnswersAsMissing(t *testing.T) {
	a := newApp(t, 0)
	paused := a.start(t, "refund", "owner", runtime.OriginInteractive)
	a.Approve(t, paused)
	id := paused.RunID
	a.bearer(t, "owner", runtime.ScopeRunCancel).call(t, a, http.MethodDelete, runPathAPI(id, "?erase=true"), "", nil).
		wantKeys(t, http.StatusOK, "erased_at")
	var last int64
	if err := a.DB.Get(&last, `SELECT MAX(id) FROM runs`); err != nil {
		t.Fatal(err)
	}
	missing := last + 1000

	type answer struct {
		status   int
		location string
		body     string
	}
	type route struct {
		name string
		send func(id int64) answer
	}
	var routes []route
	for _, who := range []string{"owner", "admin", "approver"} {
		browser := a.signIn(t, who)
		api := a.bearer(t, who, runtime.AllScopes()...)
		page := func(method, suffix string, form url.Values) route {
			return route{fmt.Sprintf("%s: %s /runs/ID%s", who, method, suffix), func(id int64) answer {
				var res *http.Response
				var body string
				if method == http.MethodGet {
					res, body = browser.get(runPath(id, suffix))
				} else {
					res, body = browser.post(runPath(id, suffix), form)
				}
				return answer{res.StatusCode, res.Header.Get("Location"), body}
			}}
		}
		inbox := func(method, path string, form url.Values) route {
			return route{fmt.Sprintf("%s: %s %s", who, method, path), func(id int64) answer {
				p := strings.Replace(path, "ID", fmt.Sprint(id), 1)
				var res *http.Response
				var body string
				if method == http.MethodGet {
					res, body = browser.get(p)
				} else {
					res, body = browser.post(p, form)
				}
				return answer{res.StatusCode, res.Header.Get("Location"), body}
			}}
		}
		call := func(method, suffix, body string) route {
			return route{fmt.Sprintf("%s: %s /api/runs/ID%s", who, method, suffix), func(id int64) answer {
				got := api.call(t, a, method, runPathAPI(id, suffix), body, nil)
				return answer{got.status, got.header.Get("Location"), string(got.body)}
			}}
		}
		decision := `{"turn_digest":"` + paused.Digest + `","decision":"approve"}`
		routes = append(routes,
			page(http.MethodGet, "", nil), page(http.MethodGet, "/erase", nil),
			page(http.MethodPost, "/erase", url.Values{}), page(http.MethodPost, "/cancel", url.Values{}),
			inbox(http.MethodGet, "/inbox/runs/ID", nil), inbox(http.MethodPost, "/inbox/runs/ID/decision", approve(paused.Digest)),
			call(http.MethodGet, "", ""), call(http.MethodGet, "/events?follow=false", ""),
			call(http.MethodDelete, "", ""), call(http.MethodDelete, "?erase=true", ""),
			call(http.MethodPost, "/decisions", decision))
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			want := r.send(missing)
			if want.status != http.StatusNotFound {
				t.Fatalf("a missing run answers %d, want 404:\n%s", want.status, want.body)
			}
			before := rowsOf(t, a, id)
			got := r.send(id)
			if got.status != want.status || got.location != want.location || sameID(got.body, id) != sameID(want.body, missing) {
				t.Errorf("the erased run answers %d %q\n%s\nwhere a missing run answers %d %q\n%s",
					got.status, got.location, got.body, want.status, want.location, want.body)
			}
			if after := rowsOf(t, a, id); after != before {
				t.Errorf("the erased run's rows changed:\n%s\nthen\n%s", before, after)
			}
		})
	}

	t.Run("the history lists it as erased", func(t *testing.T) {
		for _, who := range []string{"owner", "admin", "approver"} {
			list := a.bearer(t, who, runtime.ScopeRunRead).call(t, a, http.MethodGet, "/api/runs", "", nil).wantKeys(t, http.StatusOK, "runs")
			var found map[string]any
			for _, r := range list["runs"].([]any) {
				if r := r.(map[string]any); r["id"] == float64(id) {
					found = r
				}
			}
			if found == nil {
				t.Fatalf("GET /api/runs as %s does not list the erased run", who)
			}
			if _, has := found["run"]; has || found["status"] != "erased" || found["erased_at"] == nil || found["termination_reason"] != nil {
				t.Errorf("GET /api/runs as %s lists the erased run as %v; want status erased, erased_at, and no run", who, found)
			}
			res, body := a.signIn(t, who).get("/runs")
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET /runs as %s: %d", who, res.StatusCode)
			}
			row := historyRow(t, body, id)
			if status, _ := attrOf(row, "data-status"); status != "erased" || !strings.Contains(textOf(row), "erased") {
				t.Errorf("the history row of the erased run says %q (%s), want erased", textOf(row), status)
			}
			if links := nodes(row, "a", "", ""); len(links) != 0 {
				t.Errorf("the history row of the erased run links to its page")
			}
		}
		list := a.bearer(t, "owner", runtime.ScopeRunRead).call(t, a, http.MethodGet, "/api/runs?status=completed", "", nil).
			wantKeys(t, http.StatusOK, "runs")
		for _, r := range list["runs"].([]any) {
			if r.(map[string]any)["id"] == float64(id) {
				t.Errorf("GET /api/runs?status=completed lists the erased run")
			}
		}
	})
}

// rowsOf sums up what the database holds of a run, the erased ones
// included (which the store reads no more): its row's state and times and
// how many rows of it each table has.
func rowsOf(t *testing.T, a *testApp, id int64) string {
	t.Helper()
	var s string
	if err := a.DB.Get(&s, `SELECT CONCAT_WS(' ', status, updated_at, COALESCE(erased_at, '-'), cancel_requested,
			(SELECT COUNT(*) FROM decisions WHERE run_id = r.id), (SELECT COUNT(*) FROM run_events WHERE run_id = r.id),
			(SELECT COUNT(*) FROM run_messages WHERE run_id = r.id), (SELECT COUNT(*) FROM webhook_deliveries WHERE run_id = r.id))
		FROM runs r WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	return s
}

// historyRow finds a run's row in the history page.
func historyRow(t *testing.T, body string, id int64) *html.Node {
	t.Helper()
	for _, row := range nodes(parsePage(t, body), "tr", "data-testid", "history-run") {
		if v, _ := attrOf(row, "data-run-id"); v == fmt.Sprint(id) {
			return row
		}
	}
	t.Fatalf("the history lists no run %d", id)
	return nil
}

// TestEraseRefusals: a run whose turn waits is not_settled (409 in the
// API; on the pages a flash on the run's page, from the question's page
// and from the form alike), erase takes only true or false, the token
// needs run:cancel; nothing is written by any of them.
func TestEraseRefusals(t *testing.T) {
	a := newApp(t, 0)
	paused := a.start(t, "refund", "owner", runtime.OriginInteractive)
	id := paused.RunID
	before := a.State(t, id)
	owner := a.bearer(t, "owner", runtime.ScopeRunCancel)
	e := owner.call(t, a, http.MethodDelete, runPathAPI(id, "?erase=true"), "", nil).wantError(t, http.StatusConflict, "not_settled")
	if msg, _ := e["message"].(string); !strings.Contains(msg, "settled") || !strings.Contains(msg, "cancel it first") {
		t.Errorf("not_settled says %q: want what to do", msg)
	}
	owner.call(t, a, http.MethodDelete, runPathAPI(id, "?erase=yes"), "", nil).wantError(t, http.StatusBadRequest, "invalid_request")
	a.bearer(t, "owner", runtime.ScopeRunRead, runtime.ScopeRunStart, runtime.ScopeRunDecide).
		call(t, a, http.MethodDelete, runPathAPI(id, "?erase=true"), "", nil).wantError(t, http.StatusForbidden, "insufficient_scope")

	browser := a.signIn(t, "owner")
	for _, send := range []func() *http.Response{
		func() *http.Response { res, _ := browser.get(runPath(id, "/erase")); return res },
		func() *http.Response { res, _ := browser.post(runPath(id, "/erase"), url.Values{}); return res },
	} {
		wantRedirect(t, send(), runPath(id, ""))
		_, body := browser.get(runPath(id, ""))
		if m := flashText.FindStringSubmatch(body); m == nil || !strings.Contains(m[1], "only a settled run can be erased") {
			t.Errorf("the run page's flash = %v, want it to say only a settled run can be erased", m)
		}
		if strings.Contains(body, `data-testid="erase-open"`) {
			t.Errorf("the page of a waiting run offers to erase it")
		}
	}
	res, _ := browser.post(runPath(id, "/erase"), url.Values{"csrf_token": {"forged"}})
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("an erase without the form's CSRF token: %d, want 403", res.StatusCode)
	}
	a.Unchanged(t, id, before)
	if a.Count(t, `SELECT COUNT(*) FROM runs WHERE erased_at IS NOT NULL`) != 0 {
		t.Error("a refused erase erased a run")
	}
}

// TestErasePagesWithoutScript: the run page of a settled run offers the
// owner (and an admin, on someone else's run) an Erase button, which opens
// a page of its own that asks first; its form erases the run and lands on
// the history with a flash.
func TestErasePagesWithoutScript(t *testing.T) {
	a := newApp(t, 0)
	for _, who := range []string{"owner", "admin"} {
		t.Run(who, func(t *testing.T) {
			paused := a.start(t, "refund", "owner", runtime.OriginInteractive)
			a.Approve(t, paused)
			id := paused.RunID
			c := a.signIn(t, who)
			_, body := c.get(runPath(id, ""))
			doc := parsePage(t, body)
			open := node(t, doc, "button", "data-testid", "erase-open")
			if form := open.Parent; form == nil || form.Data != "form" {
				t.Fatal("the Erase button is not in a form")
			} else if action, _ := attrOf(form, "action"); action != runPath(id, "/erase") {
				t.Errorf("the Erase button's form goes to %q", action)
			}
			if _, hidden := attrOf(node(t, doc, "div", "data-testid", "erase-confirm"), "hidden"); !hidden {
				t.Error("the in-page confirmation shows without a script")
			}

			res, body := c.get(runPath(id, "/erase"))
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d", runPath(id, "/erase"), res.StatusCode)
			}
			page := parsePage(t, body)
			if q := textOf(node(t, page, "p", "data-testid", "erase-question")); !strings.Contains(q, "cannot be undone") {
				t.Errorf("the question says %q", q)
			}
			form := node(t, page, "form", "data-testid", "erase-form")
			if method, _ := attrOf(form, "method"); method != "post" {
				t.Errorf("the erase form's method is %q", method)
			}
			if len(nodes(form, "input", "name", "csrf_token")) != 1 {
				t.Error("the erase form carries no CSRF token")
			}
			if a.Count(t, `SELECT COUNT(*) FROM runs WHERE id = ? AND erased_at IS NULL`, id) != 1 {
				t.Fatal("asking erased the run")
			}

			res, _ = c.post(runPath(id, "/erase"), url.Values{})
			wantRedirect(t, res, "/runs")
			_, body = c.get("/runs")
			if m := flashText.FindStringSubmatch(body); m == nil || !strings.Contains(m[1], fmt.Sprintf("Run %d was erased", id)) {
				t.Errorf("the history's flash = %v, want it to say run %d was erased", m, id)
			}
			var by int64
			if err := a.DB.Get(&by, `SELECT erased_by FROM runs WHERE id = ?`, id); err != nil || by != a.Users[who].ID {
				t.Errorf("erased_by = %d (%v), want %s's id", by, err, who)
			}
		})
	}
}

// TestEraseStorm: twenty erases of one run at once, by its owner and an
// admin: exactly one erases it, every other is told 404 as for a missing
// run, and the run is stamped once.
func TestEraseStorm(t *testing.T) {
	a := newApp(t, 0)
	paused := a.start(t, "refund", "owner", runtime.OriginInteractive)
	a.Approve(t, paused)
	callers := []caller{a.bearer(t, "owner", runtime.ScopeRunCancel), a.bearer(t, "admin", runtime.ScopeRunCancel)}
	const n = 20
	statuses := make(chan int, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses <- callers[i%2].call(t, a, http.MethodDelete, runPathAPI(paused.RunID, "?erase=true"), "", nil).status
		}()
	}
	close(start)
	wg.Wait()
	close(statuses)
	got := map[int]int{}
	for s := range statuses {
		got[s]++
	}
	if got[http.StatusOK] != 1 || got[http.StatusNotFound] != n-1 {
		t.Errorf("answers by status = %v, want one 200 and %d 404", got, n-1)
	}
	if c := a.Count(t, `SELECT COUNT(*) FROM runs WHERE id = ? AND erased_at IS NOT NULL`, paused.RunID); c != 1 {
		t.Errorf("the run is not erased")
	}
}
