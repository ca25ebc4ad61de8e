package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

func eventsPath(id int64, query string) string {
	p := fmt.Sprintf("/api/runs/%d/events", id)
	if query != "" {
		p += "?" + query
	}
	return p
}

// openEvents opens a run's event stream, read as its lines arrive.
func openEvents(t *testing.T, c *client, id int64, query string) (*http.Response, *testrig.Stream) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.base+eventsPath(id, query), nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET %s = %d %s, want 200", eventsPath(id, query), res.StatusCode, b)
	}
	return res, testrig.Read(t, res.Body, time.Now())
}

// storedSeqs are a run's event seqs and kinds as the database holds them.
func (a *testApp) storedSeqs(t *testing.T, id int64) (seqs []int, kinds []string) {
	t.Helper()
	for _, e := range a.Events(t, id) {
		seqs, kinds = append(seqs, e.Seq), append(kinds, string(e.Kind))
	}
	return seqs, kinds
}

// approveInBackground approves a waiting run with a native POST from
// another client and reports when that request has answered.
func approveInBackground(t *testing.T, a *testApp, paused runtime.Outcome) <-chan time.Time {
	t.Helper()
	c := a.signIn(t, "approver")
	req := c.postRequest(inboxPath(paused.RunID, "decision"), approve(paused.Digest), "")
	done := make(chan time.Time, 1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		res, err := c.http.Do(req)
		if err != nil {
			t.Errorf("approval: %v", err)
		} else {
			res.Body.Close()
			if res.StatusCode != http.StatusSeeOther {
				t.Errorf("approval answered %d, want 303", res.StatusCode)
			}
		}
		done <- time.Now()
	}()
	t.Cleanup(func() { <-exited })
	return done
}

// waitRunning waits until a decision has claimed the run.
func (a *testApp) waitRunning(t *testing.T, id int64) {
	t.Helper()
	a.WaitRun(t, id, 5*time.Second, "claimed by its approval", func(r *runtime.Run) bool { return !r.Status.Waiting() })
}

// eventSeqs checks the event lines' shape and returns their seqs.
func eventSeqs(t *testing.T, lines []testrig.Line) []int {
	t.Helper()
	var seqs []int
	for _, l := range lines {
		if l.Type() != "event" {
			continue
		}
		for _, k := range []string{"seq", "kind", "round", "duration_ms", "created_at", "payload"} {
			if _, ok := l.Value[k]; !ok {
				t.Errorf("event line %s has no %q", l.Raw, k)
			}
		}
		if _, ok := l.Value["payload"].(map[string]any); !ok {
			t.Errorf("event line %s: payload is not an object", l.Raw)
		}
		seqs = append(seqs, l.Int("seq"))
	}
	return seqs
}

func seqRange(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// TestEventsBacklog: a waiting run's stream is attached, every stored event
// in order with its privacy-filtered payload, and end — at once, whether
// the client follows or not, since a waiting run records nothing until
// someone decides.
func TestEventsBacklog(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "refund")
	wantSeqs, wantKinds := a.storedSeqs(t, paused.RunID)
	if len(wantSeqs) < 2 {
		t.Fatalf("run has %d events, want a few", len(wantSeqs))
	}
	owner := a.signIn(t, "owner")

	for _, query := range []string{"follow=false", "", "after_seq=0&follow=true"} {
		t.Run("query "+query, func(t *testing.T) {
			res, lines := openEvents(t, owner, paused.RunID, query)
			if got := res.Header.Get("Content-Type"); got != "application/x-ndjson; charset=utf-8" {
				t.Errorf("Content-Type = %q", got)
			}
			if got := res.Header.Get("Cache-Control"); got != "no-cache, no-transform" {
				t.Errorf("Cache-Control = %q", got)
			}
			got := lines.Rest(t, 5*time.Second)
			if len(got) != len(wantSeqs)+2 {
				t.Fatalf("%d lines, want attached, %d events, end: %v", len(got), len(wantSeqs), got)
			}
			att := got[0]
			if att.Type() != "attached" || att.Int("first_seq") != 1 || att.Int("latest_seq") != wantSeqs[len(wantSeqs)-1] ||
				att.Value["status"] != string(runtime.StatusWaitingForApproval) || att.Value["live"] != false {
				t.Errorf("first line = %s, want attached, first_seq 1, latest_seq %d, waiting_for_approval, not live",
					att.Raw, wantSeqs[len(wantSeqs)-1])
			}
			events := got[1 : len(got)-1]
			if gotSeqs := eventSeqs(t, events); !slices.Equal(gotSeqs, wantSeqs) {
				t.Errorf("event seqs = %v, want %v", gotSeqs, wantSeqs)
			}
			for i, l := range events {
				if l.Value["kind"] != wantKinds[i] {
					t.Errorf("event %d kind = %v, want %s", l.Int("seq"), l.Value["kind"], wantKinds[i])
				}
				for _, secret := range []string{"MARKER", order} {
					if strings.Contains(l.Raw, secret) {
						t.Errorf("event line %s shows %q past the metadata privacy filter", l.Raw, secret)
					}
				}
			}
			if end := got[len(got)-1]; end.Type() != "end" || end.Value["status"] != string(runtime.StatusWaitingForApproval) {
				t.Errorf("last line = %s, want end with waiting_for_approval", end.Raw)
			}
		})
	}
}

// TestEventsFollowAnotherRequestsContinuation: a follower sees the steps
// of a continuation that a different HTTP request drives, while that
// request is still running it, with consecutive seqs, then end.
func TestEventsFollowAnotherRequestsContinuation(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "slow")
	before := len(a.Events(t, paused.RunID))
	owner := a.signIn(t, "owner")

	// A waiting run's stream ends at once, so the follower
	// attaches once the decision has claimed the run.
	approved := approveInBackground(t, a, paused)
	a.waitRunning(t, paused.RunID)
	_, lines := openEvents(t, owner, paused.RunID, fmt.Sprintf("after_seq=%d", before))
	att := lines.Next(t, 5*time.Second)
	if att.Type() != "attached" || att.Value["live"] != true || att.Value["status"] != string(runtime.StatusRunning) {
		t.Fatalf("first line = %s, want attached to a live, running run", att.Raw)
	}
	if att.Int("first_seq") != before+1 {
		t.Errorf("first_seq = %d, want %d", att.Int("first_seq"), before+1)
	}
	got := lines.Rest(t, 15*time.Second)
	var finished time.Time
	select {
	case finished = <-approved:
	case <-time.After(15 * time.Second):
		t.Fatal("the approval request did not finish")
	}

	if len(got) == 0 || got[len(got)-1].Type() != "end" || got[len(got)-1].Value["status"] != string(runtime.StatusCompleted) {
		t.Fatalf("lines = %v, want events then end with completed", got)
	}
	after := len(a.Events(t, paused.RunID))
	if gotSeqs := eventSeqs(t, got); !slices.Equal(gotSeqs, seqRange(before+1, after)) {
		t.Errorf("event seqs = %v, want %v", gotSeqs, seqRange(before+1, after))
	}
	// Live: events recorded after the follower attached, delivered while
	// the approving request was still carrying the continuation out.
	liveEarly := 0
	for _, l := range got {
		if l.Type() == "event" && l.Int("seq") > att.Int("latest_seq") && l.Arrived.Before(finished) {
			liveEarly++
		}
	}
	if liveEarly == 0 {
		t.Errorf("no event recorded after attaching arrived before the approval request finished at %s: %v",
			finished.Format(time.StampMicro), got)
	}
	for _, l := range got[:len(got)-1] {
		if l.Type() != "event" && l.Type() != "keepalive" {
			t.Errorf("unexpected line %s", l.Raw)
		}
	}
}

// TestEventsReconnect: a client that drops the stream after three events
// and reconnects with after_seq=3 gets exactly the rest, no duplicate and
// no gap.
func TestEventsReconnect(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "slow")
	owner := a.signIn(t, "owner")
	approveInBackground(t, a, paused)
	a.waitRunning(t, paused.RunID)

	res, lines := openEvents(t, owner, paused.RunID, "")
	if att := lines.Next(t, 5*time.Second); att.Type() != "attached" || att.Int("first_seq") != 1 {
		t.Fatalf("first line = %s, want attached from seq 1", att.Raw)
	}
	var seqs []int
	for len(seqs) < 3 {
		if l := lines.Next(t, 5*time.Second); l.Type() == "event" {
			seqs = append(seqs, l.Int("seq"))
		}
	}
	res.Body.Close() // the connection drops

	_, lines = openEvents(t, owner, paused.RunID, "after_seq=3")
	att := lines.Next(t, 5*time.Second)
	if att.Type() != "attached" || att.Int("first_seq") != 4 {
		t.Errorf("attached after reconnecting = %s, want first_seq 4", att.Raw)
	}
	got := lines.Rest(t, 15*time.Second)
	if len(got) == 0 || got[len(got)-1].Type() != "end" || got[len(got)-1].Value["status"] != string(runtime.StatusCompleted) {
		t.Fatalf("lines = %v, want end with completed last", got)
	}
	seqs = append(seqs, eventSeqs(t, got)...)
	if n := len(a.Events(t, paused.RunID)); !slices.Equal(seqs, seqRange(1, n)) {
		t.Errorf("seqs over both connections = %v, want 1..%d once each", seqs, n)
	}
}

// TestEventsGapShows: when events after after_seq are missing, first_seq
// says so.
func TestEventsGapShows(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "refund")
	n := len(a.Events(t, paused.RunID))
	if n < 3 {
		t.Fatalf("run has %d events, want at least 3", n)
	}
	if _, err := a.DB.Exec(`DELETE FROM run_events WHERE run_id = ? AND seq = 2`, paused.RunID); err != nil {
		t.Fatal(err)
	}
	_, lines := openEvents(t, a.signIn(t, "owner"), paused.RunID, "after_seq=1&follow=false")
	got := lines.Rest(t, 5*time.Second)
	if len(got) < 2 {
		t.Fatalf("lines = %v", got)
	}
	att := got[0]
	if att.Type() != "attached" || att.Int("first_seq") != 3 || att.Int("latest_seq") != n {
		t.Errorf("attached = %s, want first_seq 3 (> after_seq+1) and latest_seq %d", att.Raw, n)
	}
	if gotSeqs := eventSeqs(t, got); !slices.Equal(gotSeqs, seqRange(3, n)) {
		t.Errorf("event seqs = %v, want %v", gotSeqs, seqRange(3, n))
	}
}

// TestEventsRefusals: the stream opens for the run's owner and admins;
// everyone else, and bad queries, get a JSON error before any line.
func TestEventsRefusals(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "refund")
	id := paused.RunID
	tests := []struct {
		name, role, path string
		wantStatus       int
		wantCode         string // "" for a stream
	}{
		{"owner", "owner", eventsPath(id, "follow=false"), http.StatusOK, ""},
		{"admin", "admin", eventsPath(id, "follow=false"), http.StatusOK, ""},
		{"approver", "approver", eventsPath(id, ""), http.StatusNotFound, "not_found"},
		{"other", "other", eventsPath(id, ""), http.StatusNotFound, "not_found"},
		{"signed out", "", eventsPath(id, ""), http.StatusUnauthorized, "unauthorized"},
		{"negative after_seq", "owner", eventsPath(id, "after_seq=-1"), http.StatusBadRequest, "invalid_request"},
		{"word after_seq", "owner", eventsPath(id, "after_seq=abc"), http.StatusBadRequest, "invalid_request"},
		{"empty after_seq", "owner", eventsPath(id, "after_seq="), http.StatusBadRequest, "invalid_request"},
		{"after_seq beyond any seq", "owner", eventsPath(id, "after_seq=2147483648"), http.StatusBadRequest, "invalid_request"},
		{"after_seq near the int64 maximum", "owner", eventsPath(id, "after_seq=9223372036854775807"), http.StatusBadRequest, "invalid_request"},
		{"the largest after_seq", "owner", eventsPath(id, "after_seq=2147483647&follow=false"), http.StatusOK, ""},
		{"follow maybe", "owner", eventsPath(id, "follow=maybe"), http.StatusBadRequest, "invalid_request"},
		{"unknown run", "owner", eventsPath(id+1000, ""), http.StatusNotFound, "not_found"},
		{"malformed id", "owner", "/api/runs/abc/events", http.StatusNotFound, "not_found"},
		{"id with a plus sign", "owner", fmt.Sprintf("/api/runs/+%d/events", id), http.StatusNotFound, "not_found"},
		{"id with a leading zero", "owner", fmt.Sprintf("/api/runs/0%d/events", id), http.StatusNotFound, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, body := a.as(t, tt.role).get(tt.path)
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d, want %d: %s", res.StatusCode, tt.wantStatus, body)
			}
			if tt.wantCode == "" {
				if !strings.HasPrefix(body, `{"type":"attached"`) {
					t.Errorf("body = %s, want a stream", body)
				}
				return
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q, want JSON", ct)
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Code != tt.wantCode || e.Error.Message == "" {
				t.Errorf("body = %s, want error %q with a message", body, tt.wantCode)
			}
		})
	}
}

// TestEventsKeepalives: while the run is in a silent step, the stream
// sends keepalives whenever --keepalive passes without a line.
func TestEventsKeepalives(t *testing.T) {
	a := newApp(t, 300*time.Millisecond)
	paused, _ := a.Waiting(t, "silent")
	before := len(a.Events(t, paused.RunID))
	approveInBackground(t, a, paused)
	a.waitRunning(t, paused.RunID)
	_, lines := openEvents(t, a.signIn(t, "owner"), paused.RunID, fmt.Sprintf("after_seq=%d", before))
	got := lines.Rest(t, 15*time.Second)
	if len(got) == 0 || got[len(got)-1].Type() != "end" || got[len(got)-1].Value["status"] != string(runtime.StatusCompleted) {
		t.Fatalf("lines = %v, want end with completed last", got)
	}
	// The longest run of keepalives between two lines of another kind: the
	// 2.5 s silent tool call, at one keepalive per 300 ms.
	most, run := 0, 0
	for _, l := range got {
		switch {
		case l.Type() == "keepalive":
			if l.Raw != `{"type":"keepalive"}` {
				t.Errorf("keepalive line = %s", l.Raw)
			}
			run++
			most = max(most, run)
		default:
			run = 0
		}
	}
	if most < 3 {
		t.Errorf("at most %d keepalives in a row during a 2.5 s silent step with a 300 ms keepalive, want 3 or more: %v", most, got)
	}
	if gotSeqs := eventSeqs(t, got); !slices.Equal(gotSeqs, seqRange(before+1, len(a.Events(t, paused.RunID)))) {
		t.Errorf("event seqs = %v, want %d..%d", gotSeqs, before+1, len(a.Events(t, paused.RunID)))
	}
}
