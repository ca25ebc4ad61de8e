package web_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// queuedRun is a run of the owner's that stays live, queued, for no
// worker takes it: its event stream stays open until the client leaves.
func queuedRun(t *testing.T, a *testApp) int64 {
	t.Helper()
	id, err := a.Engine.Enqueue(context.Background(), runtime.StartRequest{Configuration: "refund", Prompt: "Refund W-1",
		Owner: a.Users["owner"].Actor(), Origin: runtime.OriginInteractive})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// getEvents opens a run's event stream for a caller; the body is the
// caller's to read or close.
func getEvents(t *testing.T, a *testApp, c caller, id int64) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, a.srv.URL+eventsPath(id, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	res, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// attached opens an event stream that must go through, and waits for its
// first line.
func attached(t *testing.T, a *testApp, c caller, id int64) *testrig.Stream {
	t.Helper()
	res := getEvents(t, a, c, id)
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("event stream: %d %s, want 200", res.StatusCode, b)
	}
	st := testrig.Read(t, res.Body, time.Now())
	if l := st.Next(t, 10*time.Second); l.Type() != "attached" {
		t.Fatalf("first line %s, want attached", l.Raw)
	}
	return st
}

// wantTooMany checks a refusal for having too much open at once.
func wantTooMany(t *testing.T, res *http.Response) {
	t.Helper()
	b, _ := io.ReadAll(res.Body)
	got := apiAnswer{status: res.StatusCode, header: res.Header, body: b}
	got.wantError(t, http.StatusTooManyRequests, "too_many_requests")
	if secs, err := strconv.Atoi(res.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Errorf("Retry-After %q, want a number of seconds", res.Header.Get("Retry-After"))
	}
}

// TestEventStreamsPerUser: a user follows at most 64 event streams at
// once; the 65th is 429 too_many_requests with Retry-After, another
// user's stream goes through meanwhile, and once one of the 64 is closed
// the next goes through.
func TestEventStreamsPerUser(t *testing.T) {
	a := newApp(t, 0)
	id := queuedRun(t, a)
	owner := a.bearer(t, "owner", "run:read")
	streams := make([]*testrig.Stream, 64)
	for i := range streams {
		streams[i] = attached(t, a, owner, id)
	}
	wantTooMany(t, getEvents(t, a, owner, id))
	attached(t, a, a.bearer(t, "admin", "run:read"), id)

	streams[0].Close()
	// The server counts the stream until its handler sees the client gone.
	ok := testrig.Eventually(10*time.Second, func() bool {
		res := getEvents(t, a, owner, id)
		if res.StatusCode == http.StatusTooManyRequests {
			res.Body.Close()
			return false
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("event stream after one closed: %d, want 200 (or 429 until the server saw it closed)", res.StatusCode)
		}
		st := testrig.Read(t, res.Body, time.Now())
		if l := st.Next(t, 10*time.Second); l.Type() != "attached" {
			t.Fatalf("first line %s, want attached", l.Raw)
		}
		return true
	})
	if !ok {
		t.Fatal("no event stream went through within 10 s of closing one of 64")
	}
}

// TestInboxStreamsCountPerUser: the inbox's streamed decision is a stream
// of its user like an event stream of the API: with 64 open it is refused
// 429 before anything is claimed, and the same decision posted as a plain
// form (what the page's script falls back to) goes through.
func TestInboxStreamsCountPerUser(t *testing.T) {
	a := newApp(t, 0)
	id := queuedRun(t, a)
	admin := a.bearer(t, "admin", "run:read")
	for range 64 {
		attached(t, a, admin, id)
	}
	paused, _ := a.Waiting(t, "refund")
	before := a.State(t, paused.RunID)
	c := a.signIn(t, "admin")
	res, err := c.http.Do(c.postRequest(inboxPath(paused.RunID, "decision"), approve(paused.Digest), "application/x-ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
		t.Fatalf("streamed inbox decision with 64 streams open: %d (Retry-After %q), want 429 with Retry-After",
			res.StatusCode, res.Header.Get("Retry-After"))
	}
	a.Unchanged(t, paused.RunID, before)

	res, _ = c.post(inboxPath(paused.RunID, "decision"), approve(paused.Digest))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("plain form decision: %d, want 303", res.StatusCode)
	}
	if got := a.Decisions(t, paused.RunID); len(got) != 1 {
		t.Errorf("%d decisions after the plain form, want 1", len(got))
	}
}
