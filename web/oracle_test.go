package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestStrangerLearnsNothing: a user who may not see a run learns nothing
// about it, as a table over
// (actor × run state × surface): a user who may neither decide nor read a
// run gets, from every route, the very answer a run that does not exist
// gets — whatever the run's state, and even when they send the run's real
// turn digest — and nothing is written. A decider's refusals stay as §4
// gives them (TestInboxRefusals, TestAPIRefusals); the last cases check
// that a decider still tells a settled run from a missing one.
func TestStrangerLearnsNothing(t *testing.T) {
	a := newApp(t, 0)
	ctx := context.Background()
	owner := a.Users["owner"].Actor()

	// states are runs owned by "owner", each in one state, with the digest
	// a decider would have seen.
	type runAt struct {
		name   string
		id     int64
		digest string
	}
	var states []runAt
	add := func(name string, id int64, digest string) { states = append(states, runAt{name, id, digest}) }

	o := a.start(t, "refund", "owner", runtime.OriginInteractive)
	add("waiting for approval", o.RunID, o.Digest)
	o = a.start(t, "input", "owner", runtime.OriginInteractive)
	add("waiting for input", o.RunID, o.Digest)
	o = a.start(t, "refund", "owner", runtime.OriginProcess)
	add("a process run waiting", o.RunID, o.Digest)
	o = a.start(t, "refund", "owner", runtime.OriginInteractive)
	if _, err := a.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "approve",
		Actor: a.Users["approver"].Actor(), Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	add("decided, for a worker", o.RunID, o.Digest)
	o = a.start(t, "refund", "owner", runtime.OriginInteractive)
	c, err := a.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest, Decision: "approve",
		Actor: a.Users["approver"].Actor(), Path: runtime.PathRequest})
	if err != nil {
		t.Fatal(err)
	}
	if out := c.Run(ctx, nil); out.Status != runtime.StatusCompleted {
		t.Fatalf("decided run is %s, want completed", out.Status)
	}
	// The digest that was decided: before, a guess of it was told
	// already_resuming, which confirmed the guess.
	add("completed, its decided digest", o.RunID, o.Digest)
	o = a.start(t, "refund", "owner", runtime.OriginInteractive)
	if _, err := a.Engine.Cancel(ctx, o.RunID, owner); err != nil {
		t.Fatal(err)
	}
	add("cancelled", o.RunID, o.Digest)
	running, err := a.Engine.Start(ctx, runtime.StartRequest{Configuration: "refund", Prompt: "Refund X-running", Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	add("running, held by a continuation", running.RunID(), states[0].digest)

	var last int64
	if err := a.DB.Get(&last, `SELECT MAX(id) FROM runs`); err != nil {
		t.Fatal(err)
	}
	missing := last + 1000

	// Every route that names a run, for one id and digest.
	type answer struct {
		status   int
		location string
		body     string
	}
	type surface struct {
		name string
		send func(t *testing.T, id int64, digest string) answer
	}
	browser := a.signIn(t, "other")
	api := a.bearer(t, "other", "run:read", "run:decide", "run:cancel", "run:start")
	session := a.session(t, "other")
	htmlPost := func(path func(int64) string, form func(string) url.Values) func(*testing.T, int64, string) answer {
		return func(t *testing.T, id int64, digest string) answer {
			res, body := browser.post(path(id), form(digest))
			return answer{res.StatusCode, res.Header.Get("Location"), body}
		}
	}
	htmlGet := func(path func(int64) string) func(*testing.T, int64, string) answer {
		return func(t *testing.T, id int64, _ string) answer {
			res, body := browser.get(path(id))
			return answer{res.StatusCode, res.Header.Get("Location"), body}
		}
	}
	apiCall := func(c caller, method, suffix string, body func(string) string, header http.Header) func(*testing.T, int64, string) answer {
		return func(t *testing.T, id int64, digest string) answer {
			b := ""
			if body != nil {
				b = body(digest)
			}
			got := c.call(t, a, method, runPathAPI(id, suffix), b, header)
			return answer{got.status, got.header.Get("Location"), string(got.body)}
		}
	}
	decision := func(d string) string { return `{"turn_digest":"` + d + `","decision":"approve"}` }
	input := func(d string) string { return `{"turn_digest":"` + d + `","input":{"amount":250}}` }
	ndjson := http.Header{"Accept": {"application/x-ndjson"}}
	surfaces := []surface{
		{"inbox decision", htmlPost(func(id int64) string { return inboxPath(id, "decision") }, approve)},
		{"inbox deny", htmlPost(func(id int64) string { return inboxPath(id, "decision") }, func(d string) url.Values {
			return url.Values{"turn_digest": {d}, "decision": {"deny"}, "reason": {"no"}}
		})},
		{"inbox input", htmlPost(func(id int64) string { return inboxPath(id, "input") }, answerForm)},
		{"inbox input that would not validate", htmlPost(func(id int64) string { return inboxPath(id, "input") }, func(d string) url.Values {
			return url.Values{"turn_digest": {d}, "amount": {"abc"}}
		})},
		{"run page", htmlGet(func(id int64) string { return runPath(id, "") })},
		{"cancel form", htmlPost(func(id int64) string { return runPath(id, "/cancel") }, func(string) url.Values { return url.Values{} })},
		{"API decision", apiCall(api, http.MethodPost, "/decisions", decision, nil)},
		{"API decision, streamed", apiCall(api, http.MethodPost, "/decisions", decision, ndjson)},
		{"API decision by session", apiCall(session, http.MethodPost, "/decisions", decision, nil)},
		{"API input", apiCall(api, http.MethodPost, "/input", input, nil)},
		{"API run", apiCall(api, http.MethodGet, "", nil, nil)},
		{"API events", apiCall(api, http.MethodGet, "/events?follow=false", nil, nil)},
		{"API messages", apiCall(api, http.MethodGet, "/messages", nil, nil)},
		{"API messages, a page on", apiCall(api, http.MethodGet, "/messages?limit=1&after=bTE", nil, nil)},
		{"API messages by session", apiCall(session, http.MethodGet, "/messages", nil, nil)},
		{"run page, earlier turns", htmlGet(func(id int64) string { return runPath(id, "?before_turn=2") })},
		{"API cancel", apiCall(api, http.MethodDelete, "", nil, nil)},
		{"erase question", htmlGet(func(id int64) string { return runPath(id, "/erase") })},
		{"erase form", htmlPost(func(id int64) string { return runPath(id, "/erase") }, func(string) url.Values { return url.Values{} })},
		{"API erase", apiCall(api, http.MethodDelete, "?erase=true", nil, nil)},
	}

	for _, s := range surfaces {
		t.Run(s.name, func(t *testing.T) {
			want := s.send(t, missing, states[0].digest)
			if want.status != http.StatusNotFound {
				t.Fatalf("a missing run answers %d, want 404:\n%s", want.status, want.body)
			}
			for _, st := range states {
				before := a.State(t, st.id)
				got := s.send(t, st.id, st.digest)
				if got.status != want.status || got.location != want.location ||
					sameID(got.body, st.id) != sameID(want.body, missing) {
					t.Errorf("%s: a stranger is told %d %q\n%s\nwhere a missing run is %d %q\n%s",
						st.name, got.status, got.location, sameID(got.body, st.id), want.status, want.location, sameID(want.body, missing))
				}
				a.Unchanged(t, st.id, before)
			}
		})
	}

	// A decider may learn that a run they could have decided settled.
	t.Run("a decider still hears not_waiting", func(t *testing.T) {
		cancelled := states[5]
		got := a.bearer(t, "approver", "run:decide").call(t, a, http.MethodPost, runPathAPI(cancelled.id, "/decisions"),
			decision(cancelled.digest), nil)
		got.wantError(t, http.StatusConflict, "not_waiting")
	})
}

// sameID replaces where an answer names a run by its id, so that two
// answers about two ids compare equal when they say the same thing.
func sameID(body string, id int64) string {
	return regexp.MustCompile(fmt.Sprintf(`(run |runs/)%d\b`, id)).ReplaceAllString(body, "${1}ID")
}
