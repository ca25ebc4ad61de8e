package web_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// apiCase is one request a route is tried with: its path, its body, and
// the run it aims at (0 for none).
type apiCase struct {
	path, body string
	run        int64
	header     http.Header
}

// TestAPIAuthentication tries every API route with every way of
// authenticating: a valid token with the route's scope and a signed-in
// session pass; no credentials, an expired, revoked or malformed token, or
// another scheme are 401 with a Bearer challenge; a valid token without
// the scope is 403. A refused request writes nothing.
func TestAPIAuthentication(t *testing.T) {
	a := newApp(t, 0)
	waiting := func(t *testing.T, cfg string) (runtime.Outcome, int64) {
		out := a.start(t, cfg, "owner", runtime.OriginInteractive)
		return out, out.RunID
	}
	routes := []struct {
		method, route, scope string
		setup                func(t *testing.T) apiCase
		wantStatus           int
		wantKeys             []string
		ndjson               bool
	}{
		{http.MethodGet, "/api/approvals", "run:read",
			func(t *testing.T) apiCase { return apiCase{path: "/api/approvals"} },
			http.StatusOK, []string{"approvals"}, false},
		{http.MethodPost, "/api/runs", "run:start",
			func(t *testing.T) apiCase {
				order := a.Order(t)
				return apiCase{path: "/api/runs", body: jsonBody(t, map[string]any{"configuration": "refund", "prompt": "Refund " + order})}
			},
			http.StatusCreated, []string{"run", "steps", "outcome"}, false},
		{http.MethodGet, "/api/runs/:id", "run:read",
			func(t *testing.T) apiCase {
				_, id := waiting(t, "refund")
				return apiCase{path: runPathAPI(id, ""), run: id}
			},
			http.StatusOK, []string{"run"}, false},
		{http.MethodDelete, "/api/runs/:id", "run:cancel",
			func(t *testing.T) apiCase {
				_, id := waiting(t, "refund")
				return apiCase{path: runPathAPI(id, ""), run: id}
			},
			http.StatusOK, []string{"run", "cancel"}, false},
		{http.MethodGet, "/api/runs/:id/events", "run:read",
			func(t *testing.T) apiCase {
				_, id := waiting(t, "refund")
				return apiCase{path: runPathAPI(id, "/events?follow=false"), run: id}
			},
			http.StatusOK, nil, true},
		{http.MethodPost, "/api/runs/:id/messages", "run:start",
			func(t *testing.T) apiCase {
				id := a.settledRun(t, "owner")
				return apiCase{path: runPathAPI(id, "/messages"), body: `{"content":"and ORD-1002?","async":true}`, run: id}
			},
			http.StatusCreated, []string{"run"}, false},
		{http.MethodPost, "/api/runs/:id/decisions", "run:decide",
			func(t *testing.T) apiCase {
				out, id := waiting(t, "refund")
				return apiCase{path: runPathAPI(id, "/decisions"), body: approveBody(t, out.Digest), run: id}
			},
			http.StatusOK, []string{"steps", "outcome"}, false},
		{http.MethodPost, "/api/runs/:id/input", "run:decide",
			func(t *testing.T) apiCase {
				out, id := waiting(t, "input")
				return apiCase{path: runPathAPI(id, "/input"), run: id,
					body: jsonBody(t, map[string]any{"turn_digest": out.Digest, "input": map[string]any{"amount": 250, "note": "fine"}})}
			},
			http.StatusOK, []string{"steps", "outcome"}, false},
	}

	type variant struct {
		name       string
		caller     func(t *testing.T, scope string) caller
		wantStatus int    // 0: the route's own
		wantCode   string // for a refusal
	}
	variants := []variant{
		{"valid token", func(t *testing.T, scope string) caller { return a.bearer(t, "owner", scope) }, 0, ""},
		{"session", func(t *testing.T, _ string) caller { return a.session(t, "owner") }, 0, ""},
		{"missing token", func(*testing.T, string) caller { return anonymous() }, http.StatusUnauthorized, "unauthorized"},
		{"expired token", func(t *testing.T, scope string) caller { return a.expiredBearer(t, "owner", scope) }, http.StatusUnauthorized, "unauthorized"},
		{"revoked token", func(t *testing.T, scope string) caller { return a.revokedBearer(t, "owner", scope) }, http.StatusUnauthorized, "unauthorized"},
		{"token without the scope", func(t *testing.T, scope string) caller { return a.bearer(t, "owner", otherScopes(scope)...) }, http.StatusForbidden, "insufficient_scope"},
		{"unknown token", func(*testing.T, string) caller {
			return withAuthorization("unknown", "Bearer tst_"+strings.Repeat("ab", 32))
		}, http.StatusUnauthorized, "unauthorized"},
		{"malformed token", func(*testing.T, string) caller { return withAuthorization("malformed", "Bearer nope") }, http.StatusUnauthorized, "unauthorized"},
		{"basic scheme", func(*testing.T, string) caller { return withAuthorization("basic", "Basic b3duZXI6cGFzc3dvcmQ=") }, http.StatusUnauthorized, "unauthorized"},
		{"empty header", func(*testing.T, string) caller { return withAuthorization("empty", "") }, http.StatusUnauthorized, "unauthorized"},
		{"bad token beside a session", func(t *testing.T, _ string) caller {
			c := a.session(t, "owner")
			c.header.Set("Authorization", "Bearer tst_"+strings.Repeat("0", 64))
			return c
		}, http.StatusUnauthorized, "unauthorized"},
	}

	for _, rt := range routes {
		for _, v := range variants {
			t.Run(rt.method+" "+rt.route+"/"+v.name, func(t *testing.T) {
				tc := rt.setup(t)
				var before testrig.State
				if tc.run != 0 {
					before = a.State(t, tc.run)
				}
				runs := a.Count(t, `SELECT COUNT(*) FROM runs`)
				got := v.caller(t, rt.scope).call(t, a, rt.method, tc.path, tc.body, tc.header)
				if v.wantStatus != 0 {
					e := got.wantError(t, v.wantStatus, v.wantCode)
					challenge := got.header.Get("WWW-Authenticate")
					if !strings.HasPrefix(challenge, "Bearer ") {
						t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", challenge)
					}
					if v.wantCode == "insufficient_scope" && !strings.Contains(challenge, `scope="`+rt.scope+`"`) {
						t.Errorf("WWW-Authenticate = %q, want it to name the scope %s", challenge, rt.scope)
					}
					if msg, _ := e["message"].(string); strings.Contains(msg, "tst_0") {
						t.Errorf("the message repeats the token: %q", msg)
					}
					if tc.run != 0 {
						a.Unchanged(t, tc.run, before)
					}
					if n := a.Count(t, `SELECT COUNT(*) FROM runs`); n != runs {
						t.Errorf("%d runs after a refused request, want %d", n, runs)
					}
					return
				}
				if rt.ndjson {
					if got.status != rt.wantStatus {
						t.Fatalf("status = %d, want %d: %s", got.status, rt.wantStatus, got.body)
					}
					lines := got.lines(t)
					if len(lines) == 0 || lines[0]["type"] != "attached" {
						t.Errorf("event stream = %v, want it to start with an attached line", lines)
					}
					return
				}
				got.wantKeys(t, rt.wantStatus, rt.wantKeys...)
			})
		}
	}

	// The document is public: every way of asking gets it.
	for _, v := range variants {
		t.Run("GET /api/openapi.json/"+v.name, func(t *testing.T) {
			got := v.caller(t, "run:read").call(t, a, http.MethodGet, "/api/openapi.json", "", nil)
			got.wantKeys(t, http.StatusOK, "openapi", "paths")
		})
	}
}

// TestAPITokenUseSlidesItsExpiry: a request with a token moves its expiry
// and notes its use.
func TestAPITokenUseSlidesItsExpiry(t *testing.T) {
	a := newApp(t, 0)
	plain, id := a.token(t, "owner", "run:read")
	if _, err := a.DB.Exec(`UPDATE api_tokens SET expires_at = NOW(6) + INTERVAL 3 SECOND WHERE id = ?`, id); err != nil {
		t.Fatal(err)
	}
	withAuthorization("token", "Bearer "+plain).call(t, a, http.MethodGet, "/api/approvals", "", nil).wantKeys(t, http.StatusOK, "approvals")
	tok, err := a.Store.Token(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if tok.ExpiresAt.Before(time.Now().Add(50*time.Minute)) || tok.LastUsedAt == nil {
		t.Errorf("after a use the token expires at %v, last used %v; want an hour from now, and now", tok.ExpiresAt, tok.LastUsedAt)
	}
}

// TestAPIApprovals: the open questions, oldest first, with what a decider
// needs: call ids, tool names and arguments, the digest, the schema of an
// input turn; each user sees what the inbox shows them.
func TestAPIApprovals(t *testing.T) {
	a := newApp(t, 0)
	refund := a.start(t, "refund", "owner", runtime.OriginInteractive)
	input := a.start(t, "input", "owner", runtime.OriginInteractive)
	admins := a.start(t, "refund", "admin", runtime.OriginInteractive)
	// The API lists process runs too: their process decides them here.
	process := a.start(t, "refund", "owner", runtime.OriginProcess)

	tests := []struct {
		user string
		want []int64
	}{
		{"admin", []int64{refund.RunID, input.RunID, admins.RunID, process.RunID}},
		{"approver", []int64{refund.RunID, input.RunID, admins.RunID, process.RunID}},
		{"owner", []int64{refund.RunID, input.RunID, process.RunID}},
		{"other", []int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.user, func(t *testing.T) {
			got := a.bearer(t, tt.user, "run:read").call(t, a, http.MethodGet, "/api/approvals", "", nil)
			list, ok := got.wantKeys(t, http.StatusOK, "approvals")["approvals"].([]any)
			if !ok {
				t.Fatalf("approvals is not a list: %s", got.body)
			}
			ids := []int64{}
			for _, item := range list {
				ids = append(ids, int64(item.(map[string]any)["run_id"].(float64)))
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("approvals of runs %v, want %v", ids, tt.want)
			}
		})
	}

	got := a.bearer(t, "owner", "run:read").call(t, a, http.MethodGet, "/api/approvals", "", nil)
	list := got.wantKeys(t, http.StatusOK, "approvals")["approvals"].([]any)
	first, second := list[0].(map[string]any), list[1].(map[string]any)
	if first["configuration"] != "refund" || first["kind"] != "approval" || first["turn_digest"] != refund.Digest ||
		first["waiting_since"] == nil || first["schema"] != nil {
		t.Errorf("approval = %v, want refund's approval turn with digest %s", first, refund.Digest)
	}
	calls, _ := first["pending_calls"].([]any)
	if len(calls) != 1 {
		t.Fatalf("pending_calls = %v, want one", first["pending_calls"])
	}
	call := calls[0].(map[string]any)
	args, _ := call["arguments"].(map[string]any)
	if call["id"] == "" || call["name"] != "refund_order" || args["reason"] != "MARKER-ARG" {
		t.Errorf("pending call = %v, want refund_order with its id and arguments", call)
	}
	if second["kind"] != "input" || second["turn_digest"] != input.Digest || second["schema"] == nil {
		t.Errorf("input approval = %v, want the input turn with its schema", second)
	}
}

// TestAPIStartRun: a synchronous start runs to the first pause inside the
// request and answers the run with its digest; an asynchronous one is
// queued; both belong to the caller.
func TestAPIStartRun(t *testing.T) {
	a := newApp(t, 0)
	admin := a.bearer(t, "admin", "run:start", "run:read")
	other := a.bearer(t, "other", "run:start", "run:read")

	got := other.call(t, a, http.MethodPost, "/api/runs", `{"configuration":"refund","prompt":"Refund X-1","async":false}`, nil)
	body := got.wantKeys(t, http.StatusCreated, "run", "steps", "outcome")
	run := body["run"].(map[string]any)
	id := int64(run["id"].(float64))
	stored := a.Run(t, id)
	if run["status"] != "waiting_for_approval" || run["turn_digest"] != stored.TurnDigest || stored.TurnDigest == "" ||
		run["configuration"] != "refund" || run["origin"] != "interactive" {
		t.Errorf("run = %v, want refund waiting with digest %s", run, stored.TurnDigest)
	}
	if stored.OwnerID != a.Users["other"].ID {
		t.Errorf("owner = %d, want the caller %d", stored.OwnerID, a.Users["other"].ID)
	}
	if loc := got.header.Get("Location"); loc != runPathAPI(id, "") {
		t.Errorf("Location = %q, want %q", loc, runPathAPI(id, ""))
	}
	if out := body["outcome"].(map[string]any); out["type"] != "awaiting_approval" || out["turn_digest"] != stored.TurnDigest {
		t.Errorf("outcome = %v, want awaiting_approval with the digest", out)
	}
	if steps := body["steps"].([]any); len(steps) < 2 {
		t.Errorf("steps = %v, want the rounds it ran", steps)
	}
	// GET answers the same run object.
	again := other.call(t, a, http.MethodGet, runPathAPI(id, ""), "", nil).wantKeys(t, http.StatusOK, "run")
	if fmt.Sprint(again["run"]) != fmt.Sprint(run) {
		t.Errorf("GET run = %v, want the run POST answered %v", again["run"], run)
	}

	got = admin.call(t, a, http.MethodPost, "/api/runs", `{"configuration":"refund","prompt":"Refund X-2","async":true,"origin":"process"}`, nil)
	queued := got.wantKeys(t, http.StatusCreated, "run")["run"].(map[string]any)
	if queued["status"] != "queued" || queued["origin"] != "process" {
		t.Errorf("async run = %v, want queued, origin process", queued)
	}
	if _, ok := got.object(t)["outcome"]; ok {
		t.Errorf("a queued run has an outcome: %s", got.body)
	}

	// Streamed, a start runs like the playground: steps, one terminal line.
	got = admin.call(t, a, http.MethodPost, "/api/runs", `{"configuration":"input","prompt":"ask"}`, ndjsonAccept)
	lines := got.lines(t)
	wantStreamShape(t, lines, "awaiting_input", true)
}

// TestAPIRunVisibility: a run answers to its owner and admins; anyone
// else, an unknown id and a malformed one get the same 404.
func TestAPIRunVisibility(t *testing.T) {
	a := newApp(t, 0)
	paused := a.start(t, "refund", "owner", runtime.OriginInteractive)
	tests := []struct {
		user, path string
		want       int
	}{
		{"owner", runPathAPI(paused.RunID, ""), http.StatusOK},
		{"admin", runPathAPI(paused.RunID, ""), http.StatusOK},
		{"approver", runPathAPI(paused.RunID, ""), http.StatusNotFound},
		{"other", runPathAPI(paused.RunID, ""), http.StatusNotFound},
		{"admin", runPathAPI(paused.RunID+1000, ""), http.StatusNotFound},
		{"admin", "/api/runs/abc", http.StatusNotFound},
		{"admin", "/api/runs/0", http.StatusNotFound},
		{"admin", "/api/runs/-1", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.user+" "+tt.path, func(t *testing.T) {
			got := a.bearer(t, tt.user, "run:read").call(t, a, http.MethodGet, tt.path, "", nil)
			if tt.want == http.StatusOK {
				got.wantKeys(t, tt.want, "run")
				return
			}
			got.wantError(t, tt.want, "not_found")
		})
	}

	// The digest names the turn that waits, and only while it waits.
	owner := a.bearer(t, "owner", "run:read")
	run := owner.call(t, a, http.MethodGet, runPathAPI(paused.RunID, ""), "", nil).wantKeys(t, http.StatusOK, "run")["run"].(map[string]any)
	if run["turn_digest"] != paused.Digest {
		t.Errorf("waiting run's turn_digest = %v, want %s", run["turn_digest"], paused.Digest)
	}
	if _, err := a.Engine.Cancel(context.Background(), paused.RunID, a.Users["owner"].Actor()); err != nil {
		t.Fatal(err)
	}
	run = owner.call(t, a, http.MethodGet, runPathAPI(paused.RunID, ""), "", nil).wantKeys(t, http.StatusOK, "run")["run"].(map[string]any)
	if d, ok := run["turn_digest"]; ok {
		t.Errorf("settled run shows turn_digest %v, want none", d)
	}
}

// TestAPICancel: a waiting run is cancelled at once; a running one by its
// holder; a settled one cannot be; someone else's does not exist.
func TestAPICancel(t *testing.T) {
	a := newApp(t, 0)
	owner := a.bearer(t, "owner", "run:cancel")
	paused := a.start(t, "refund", "owner", runtime.OriginInteractive)

	before := a.State(t, paused.RunID)
	a.bearer(t, "other", "run:cancel").call(t, a, http.MethodDelete, runPathAPI(paused.RunID, ""), "", nil).
		wantError(t, http.StatusNotFound, "not_found")
	a.bearer(t, "approver", "run:cancel").call(t, a, http.MethodDelete, runPathAPI(paused.RunID, ""), "", nil).
		wantError(t, http.StatusNotFound, "not_found")
	a.Unchanged(t, paused.RunID, before)

	body := owner.call(t, a, http.MethodDelete, runPathAPI(paused.RunID, ""), "", nil).wantKeys(t, http.StatusOK, "run", "cancel")
	if body["cancel"] != "done" || body["run"].(map[string]any)["status"] != "cancelled" {
		t.Errorf("cancel = %v, want done and the run cancelled", body)
	}
	owner.call(t, a, http.MethodDelete, runPathAPI(paused.RunID, ""), "", nil).wantError(t, http.StatusConflict, "not_waiting")

	// A run that is running is stopped by its holder, which may have
	// settled it already when the answer reads the run.
	crawl, _ := a.Waiting(t, "crawl")
	c, err := a.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: crawl.RunID, Digest: crawl.Digest,
		Decision: runtime.DecisionApprove, Actor: a.Users["admin"].Actor(), Path: runtime.PathRequest})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan runtime.Outcome, 1)
	go func() { done <- c.Run(context.Background(), nil) }()
	body = owner.call(t, a, http.MethodDelete, runPathAPI(crawl.RunID, ""), "", nil).wantKeys(t, http.StatusOK, "run", "cancel")
	if st := body["run"].(map[string]any)["status"]; body["cancel"] != "requested" || (st != "running" && st != "cancelled") {
		t.Errorf("cancel of a running run = %v, want requested, running or cancelled", body)
	}
	if out := <-done; out.Status != runtime.StatusCancelled {
		t.Errorf("the running continuation ended %s, want cancelled", out.Status)
	}
}

// wantStreamShape checks a continuation stream: step lines (with content
// or without), keepalives, and exactly one terminal line, the last one,
// of the wanted event.
func wantStreamShape(t *testing.T, lines []map[string]any, terminal string, content bool) {
	t.Helper()
	if len(lines) < 2 {
		t.Fatalf("stream = %v, want steps and a terminal line", lines)
	}
	steps, terminals := 0, 0
	for i, l := range lines {
		switch l["type"] {
		case "step":
			steps++
			step, _ := l["step"].(map[string]any)
			if step == nil || step["kind"] == nil || l["seq"] == nil {
				t.Errorf("step line %d = %v, want seq and step", i, l)
				continue
			}
			if got := step["content"] != nil; got != content {
				t.Errorf("step line %d has content %v, want content %v", i, step["content"], content)
			}
		case "keepalive":
		default:
			terminals++
			if i != len(lines)-1 {
				t.Errorf("terminal line %v is line %d of %d, want the last", l, i+1, len(lines))
			}
			if l["type"] != terminal {
				t.Errorf("terminal line = %v, want %s", l, terminal)
			}
		}
	}
	if steps == 0 || terminals != 1 {
		t.Errorf("%d step lines and %d terminal lines, want some and exactly one:\n%v", steps, terminals, lines)
	}
}

// TestAPIDecisionStreams: with Accept: application/x-ndjson a decision
// streams like the playground, steps with their content for the owner.
func TestAPIDecisionStreams(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "refund")
	got := a.bearer(t, "owner", "run:decide").call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"),
		approveBody(t, paused.Digest), ndjsonAccept)
	if got.status != http.StatusOK {
		t.Fatalf("status = %d: %s", got.status, got.body)
	}
	for _, h := range []struct{ name, want string }{{"Cache-Control", "no-cache, no-transform"}, {"X-Accel-Buffering", "no"}} {
		if v := got.header.Get(h.name); v != h.want {
			t.Errorf("%s = %q, want %q", h.name, v, h.want)
		}
	}
	lines := got.lines(t)
	wantStreamShape(t, lines, "done", true)
	if last := lines[len(lines)-1]; !strings.Contains(fmt.Sprint(last["answer"]), "MARKER-ANSWER") {
		t.Errorf("done line = %v, want the answer", last)
	}
	if n := a.Refunds(t, order); n != 1 {
		t.Errorf("%d refunds, want 1", n)
	}

	// Input too, as one document.
	input, _ := a.Waiting(t, "input")
	body := a.bearer(t, "owner", "run:decide").call(t, a, http.MethodPost, runPathAPI(input.RunID, "/input"),
		jsonBody(t, map[string]any{"turn_digest": input.Digest, "input": map[string]any{"amount": 250}}), nil).
		wantKeys(t, http.StatusOK, "steps", "outcome")
	if out := body["outcome"].(map[string]any); out["type"] != "done" || out["answer"] != "thanks" {
		t.Errorf("outcome = %v, want done with the answer", out)
	}
	if got := a.Run(t, input.RunID).Status; got != runtime.StatusCompleted {
		t.Errorf("run is %s, want completed", got)
	}
}

// TestAPIDecisionHidesContentFromApprovers: an approver who does not own
// the run may decide it but not read it, as in the inbox: steps come
// without content and the outcome without the answer, streamed or not.
func TestAPIDecisionHidesContentFromApprovers(t *testing.T) {
	a := newApp(t, 0)
	approver := a.bearer(t, "approver", "run:decide")
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			paused, _ := a.Waiting(t, "refund")
			var header http.Header
			if stream {
				header = ndjsonAccept
			}
			got := approver.call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"), approveBody(t, paused.Digest), header)
			if got.status != http.StatusOK {
				t.Fatalf("status = %d: %s", got.status, got.body)
			}
			for _, marker := range []string{"MARKER-TEXT", "MARKER-ANSWER", "MARKER-CUSTOMER"} {
				if strings.Contains(string(got.body), marker) {
					t.Errorf("the approver's answer shows %s:\n%s", marker, got.body)
				}
			}
			if stream {
				wantStreamShape(t, got.lines(t), "done", false)
				return
			}
			body := got.wantKeys(t, http.StatusOK, "steps", "outcome")
			for _, s := range body["steps"].([]any) {
				if c := s.(map[string]any)["content"]; c != nil {
					t.Errorf("step content %v shown to an approver", c)
				}
			}
			if out := body["outcome"].(map[string]any); out["type"] != "done" {
				t.Errorf("outcome = %v, want done", out)
			}
		})
	}
}

// TestAPIConcurrentDecisions: two decisions of one turn sent at the same
// moment: one continues the run, the other is refused with 409
// already_resuming or stale_turn, and the refund happens once.
func TestAPIConcurrentDecisions(t *testing.T) {
	a := newApp(t, 0)
	owner := a.bearer(t, "owner", "run:decide")
	admin := a.bearer(t, "admin", "run:decide")
	for i := range 4 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			paused, order := a.Waiting(t, "slow")
			var wg sync.WaitGroup
			start := make(chan struct{})
			answers := make([]apiAnswer, 2)
			for j, c := range []caller{owner, admin} {
				wg.Go(func() {
					<-start
					answers[j] = c.call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"), approveBody(t, paused.Digest), nil)
				})
			}
			close(start)
			wg.Wait()
			won := 0
			for _, got := range answers {
				switch got.status {
				case http.StatusOK:
					won++
					got.wantKeys(t, http.StatusOK, "steps", "outcome")
				case http.StatusConflict:
					e, _ := got.object(t)["error"].(map[string]any)
					if code := e["code"]; code != "already_resuming" && code != "stale_turn" {
						t.Errorf("the losing decision's code = %v, want already_resuming or stale_turn: %s", code, got.body)
					}
					// A loser that met the winner's decision is told it.
					if m := got.object(t); e["code"] == "already_resuming" && m["decision"] != nil {
						if d := m["decision"].(map[string]any); d["by"] != "owner" && d["by"] != "admin" || m["status"] == nil {
							t.Errorf("the losing decision's answer = %s, want the winner's decision and the run's status", got.body)
						}
					}
				default:
					t.Errorf("status = %d, want 200 or 409: %s", got.status, got.body)
				}
			}
			if won != 1 {
				t.Errorf("%d decisions continued the run, want exactly 1", won)
			}
			if n := a.Refunds(t, order); n != 1 {
				t.Errorf("%d refunds, want exactly 1", n)
			}
			if s := a.State(t, paused.RunID); s.Decisions != 1 || s.Run.Status != runtime.StatusCompleted {
				t.Errorf("run %s with %d decisions, want completed with 1", s.Run.Status, s.Decisions)
			}
		})
	}
}
