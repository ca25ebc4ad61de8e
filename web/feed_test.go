package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// openFeed attaches a caller to GET /api/feed (after a cursor when one is
// given) and fails the test unless it answers a stream.
func openFeed(t *testing.T, a *testApp, c caller, after string) *testrig.Stream {
	t.Helper()
	path := "/api/feed"
	if after != "" {
		path += "?after=" + url.QueryEscape(after)
	}
	req, err := http.NewRequest(http.MethodGet, a.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	client := *c.http
	client.Timeout = 0 // a stream
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		t.Fatalf("GET %s as %s: %d, want a stream", path, c.name, res.StatusCode)
	}
	s := testrig.Read(t, res.Body, time.Now())
	t.Cleanup(s.Close)
	if l := s.Next(t, 10*time.Second); l.Type() != "attached" || l.Value["cursor"] == "" {
		t.Fatalf("first line %s, want attached with a cursor", l)
	}
	return s
}

// change waits for the feed's line of a run's change.
func change(t *testing.T, s *testrig.Stream, runID int64, kind string) testrig.Line {
	t.Helper()
	return s.WaitFor(t, 10*time.Second, "run "+kind+" of run "+strconv.FormatInt(runID, 10), func(l testrig.Line) bool {
		return l.Type() == "run" && l.Int("run_id") == int(runID) && l.Value["change"] == kind
	})
}

// Every person's feed tells of the runs they may read (with the title)
// or decide (without): the owner sees their run start, wait, be decided
// by the approver and settle; the approver, who holds the approve grant
// alone, sees it wait with no title; a user who may do neither sees
// nothing of it.
func TestFeedTellsEachPersonOfTheRunsTheyMaySee(t *testing.T) {
	a := newApp(t, 0)
	owner := openFeed(t, a, a.bearer(t, "owner", runtime.ScopeRunRead), "")
	approver := openFeed(t, a, a.bearer(t, "approver", runtime.ScopeRunDecide), "")
	other := openFeed(t, a, a.session(t, "other"), "")

	paused, _ := a.Waiting(t, "refund")
	started := change(t, owner, paused.RunID, "started")
	if started.Value["title"] == nil || started.Value["configuration"] != "refund" || started.Int("turn") != 1 {
		t.Errorf("owner's started line %s, want the title, the configuration and turn 1", started)
	}
	waiting := change(t, approver, paused.RunID, "waiting")
	if _, ok := waiting.Value["title"]; ok || waiting.Value["status"] != "waiting_for_approval" {
		t.Errorf("approver's waiting line %s, want the status and no title (the approver may not read the run)", waiting)
	}
	a.Approve(t, paused)
	decided := change(t, owner, paused.RunID, "decided")
	if decided.Value["decided_by"] != "approver" || decided.Value["decision"] != "approve" {
		t.Errorf("owner's decided line %s, want approve by approver", decided)
	}
	change(t, owner, paused.RunID, "settled")
	change(t, approver, paused.RunID, "settled")

	// A run of other's own comes after: once other sees it, other has
	// been handed every change before it, and saw none of owner's.
	mine := a.start(t, "refund", "other", "")
	change(t, other, mine.RunID, "started")
	for _, l := range other.Lines() {
		if l.Type() == "run" && l.Int("run_id") == int(paused.RunID) {
			t.Errorf("other, who may neither read nor decide run %d, was told %s", paused.RunID, l)
		}
	}
}

// A client that loses its connection and attaches again after the cursor
// of the last line it had misses nothing: three runs decided while it was
// away are all told.
func TestFeedResumesAfterACut(t *testing.T) {
	a := newApp(t, 0)
	c := a.bearer(t, "owner", runtime.ScopeRunRead)
	feed := openFeed(t, a, c, "")
	var runs []runtime.Outcome
	for range 3 {
		out, _ := a.Waiting(t, "refund")
		runs = append(runs, out)
	}
	last := change(t, feed, runs[2].RunID, "waiting")
	cursor, _ := last.Value["cursor"].(string)
	feed.Close()

	for _, out := range runs {
		a.Approve(t, out)
	}
	again := openFeed(t, a, c, cursor)
	for _, out := range runs {
		if l := change(t, again, out.RunID, "decided"); l.Value["decided_by"] != "approver" {
			t.Errorf("after the cut: %s, want approver's decision", l)
		}
	}
}

// after takes only the feed's own cursors, and refuses one older than the
// change log keeps its changes.
func TestFeedRefusesABadOrExpiredCursor(t *testing.T) {
	a := newApp(t, 0)
	c := a.bearer(t, "owner", runtime.ScopeRunRead)
	c.call(t, a, http.MethodGet, "/api/feed?after=yesterday", "", nil).wantError(t, http.StatusBadRequest, "invalid_request")
	old := runtime.FeedCursor{Pos: 1, At: time.Now().Add(-runtime.ChangeRetention)}.String()
	c.call(t, a, http.MethodGet, "/api/feed?after="+old, "", nil).wantError(t, http.StatusGone, "cursor_expired")
	a.bearer(t, "owner", runtime.ScopeRunStart).call(t, a, http.MethodGet, "/api/feed", "", nil).
		wantError(t, http.StatusForbidden, "insufficient_scope")
}

// The inbox asks for a changed run's card: 200 with it while the run
// waits for the user, 204 once it does not; both say how many wait.
func TestInboxCardRoute(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "refund")
	approver := a.signIn(t, "approver")
	path := "/inbox/cards/" + strconv.FormatInt(paused.RunID, 10)
	res, body := approver.get(path)
	if res.StatusCode != http.StatusOK || res.Header.Get("X-Inbox-Total") != "1" || len(inboxRuns(t, body)) != 1 {
		t.Fatalf("GET %s: %d, total %q, body %q; want the one card and a total of 1", path, res.StatusCode, res.Header.Get("X-Inbox-Total"), body)
	}
	if res, body := a.signIn(t, "other").get(path); res.StatusCode != http.StatusNoContent || res.Header.Get("X-Inbox-Total") != "0" || body != "" {
		t.Errorf("as other, who may not decide it: %d, total %q, body %q; want 204 and 0", res.StatusCode, res.Header.Get("X-Inbox-Total"), body)
	}
	a.Approve(t, paused)
	if res, _ := approver.get(path); res.StatusCode != http.StatusNoContent || res.Header.Get("X-Inbox-Total") != "0" {
		t.Errorf("after the approval: %d, total %q; want 204 and 0", res.StatusCode, res.Header.Get("X-Inbox-Total"))
	}
}
