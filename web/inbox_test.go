package web_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
	"github.com/turnstile-dev/turnstile/web"
)

func TestNativeApproveRedirectsWithTheOutcome(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "refund")
	c := a.signIn(t, "approver")
	res, _ := c.post("/inbox/runs/"+strconv.FormatInt(paused.RunID, 10)+"/decision",
		url.Values{"turn_digest": {paused.Digest}, "decision": {"approve"}, "scope": {"once"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/inbox" {
		t.Fatalf("status %d to %q, want 303 to /inbox", res.StatusCode, res.Header.Get("Location"))
	}
	if got, want := c.flashText(), "You approved refund_order; run "+strconv.FormatInt(paused.RunID, 10)+" completed: the agent finished."; got != want {
		t.Errorf("flash = %q, want %q", got, want)
	}
	if n := a.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
}

// streamLines posts a decision with Accept: application/x-ndjson and
// returns every line, parsed.
func streamLines(t *testing.T, c *client, path string, form url.Values) (*http.Response, []map[string]any, []string) {
	t.Helper()
	res, err := c.http.Do(c.postRequest(path, form, "application/x-ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	lines, raw := testrig.Split(testrig.ReadAll(t, res.Body))
	return res, lines, raw
}

func TestStreamedApproveCountsStepsOnly(t *testing.T) {
	a := newApp(t, 500*time.Millisecond)
	paused, order := a.Waiting(t, "silent")
	c := a.signIn(t, "approver")
	res, lines, raw := streamLines(t, c, "/inbox/runs/"+strconv.FormatInt(paused.RunID, 10)+"/decision",
		url.Values{"turn_digest": {paused.Digest}, "decision": {"approve"}})
	if got := res.Header.Get("Content-Type"); got != "application/x-ndjson; charset=utf-8" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := res.Header.Get("X-Accel-Buffering"); got != "no" {
		t.Errorf("X-Accel-Buffering = %q, want no", got)
	}
	if len(lines) < 3 || lines[0]["type"] != "progress" || lines[0]["steps"] != 0.0 || lines[len(lines)-1]["type"] != "settled" {
		t.Fatalf("lines = %v, want progress 0 first and settled last", raw)
	}
	var progress []float64
	keepalives := 0
	for _, l := range lines[1 : len(lines)-1] {
		switch l["type"] {
		case "progress":
			progress = append(progress, l["steps"].(float64))
		case "keepalive":
			keepalives++
		default:
			t.Errorf("unexpected line %v", l)
		}
	}
	for i, n := range progress {
		if n != float64(i+1) {
			t.Errorf("progress lines count %v, want 1, 2, 3, …", progress)
			break
		}
	}
	// approval, refund, llm, slow_task (2.5 s silent), llm, settle.
	if len(progress) != 6 {
		t.Errorf("%d progress lines after the first, want 6: %v", len(progress), raw)
	}
	if keepalives < 3 {
		t.Errorf("%d keepalives during a 2.5 s silent step with a 500 ms keepalive, want at least 3: %v", keepalives, raw)
	}
	for _, l := range raw {
		for _, secret := range []string{"MARKER", "refund_order", "slow_task", order} {
			if strings.Contains(l, secret) {
				t.Errorf("line %q shows %q", l, secret)
			}
		}
	}
	if got := c.flash(); !strings.Contains(got, "completed") {
		t.Errorf("flash after the stream = %q, want the outcome", got)
	}
}

func TestClientAbortTheRunStillSettles(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "slow")
	c := a.signIn(t, "approver")
	res, err := c.http.Do(c.postRequest("/inbox/runs/"+strconv.FormatInt(paused.RunID, 10)+"/decision",
		url.Values{"turn_digest": {paused.Digest}, "decision": {"approve"}}, "application/x-ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	s := testrig.Read(t, res.Body, time.Now())
	line, err := s.Line(0, 15*time.Second)
	if err != nil || !strings.Contains(line.Raw, `"progress"`) {
		t.Fatalf("first line %q, %v", line, err)
	}
	s.Close() // the client goes away after the first line
	a.WaitStatus(t, paused.RunID, runtime.StatusCompleted, 15*time.Second)
	if n := a.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
}

// gatedSessions is a session store whose commits, once armed, wait until
// released: a database slow to take the inbox's flash, as in a burst of
// continuations that settle at once.
type gatedSessions struct {
	scs.Store
	armed   atomic.Bool
	entered chan struct{} // told when an armed commit starts to wait
	release chan struct{}
}

func (g *gatedSessions) Commit(token string, b []byte, expiry time.Time) error {
	if g.armed.Load() {
		select {
		case g.entered <- struct{}{}:
		default:
		}
		<-g.release
	}
	return g.Store.Commit(token, b, expiry)
}

// TestStreamedApproveKeepsAliveWhileTheFlashIsSaved: the last line of an
// inbox stream waits for the flash to be saved; meanwhile the stream gets
// its keepalives, as during every other wait.
func TestStreamedApproveKeepsAliveWhileTheFlashIsSaved(t *testing.T) {
	gate := &gatedSessions{entered: make(chan struct{}, 1), release: make(chan struct{})}
	a := newApp(t, 100*time.Millisecond, func(d *web.Deps) { gate.Store, d.Sessions.Store = d.Sessions.Store, gate })
	paused, order := a.Waiting(t, "refund")
	c := a.signIn(t, "approver")
	gate.armed.Store(true)
	released := false
	defer func() {
		if !released {
			close(gate.release)
		}
	}()
	res, err := c.http.Do(c.postRequest("/inbox/runs/"+strconv.FormatInt(paused.RunID, 10)+"/decision",
		url.Values{"turn_digest": {paused.Digest}, "decision": {"approve"}}, "application/x-ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	s := testrig.Read(t, res.Body, time.Now())
	defer s.Close()
	select {
	case <-gate.entered:
	case <-time.After(15 * time.Second):
		t.Fatalf("the flash was never saved:%s", s)
	}
	// Four steps (approval, refund, llm, settle) are recorded before the
	// flash is saved; only a keepalive of the wait itself counts them all.
	s.WaitFor(t, 5*time.Second, "a keepalive while the flash waited for the database", func(l testrig.Line) bool {
		return l.Type() == "keepalive" && l.Int("steps") == 4
	})
	close(gate.release)
	released = true
	lines, err := s.Wait(t, 15*time.Second)
	if err != nil || lines[len(lines)-1].Type() != "settled" {
		t.Fatalf("stream ended with %v, %v; want settled last", lines, err)
	}
	if got := c.flash(); !strings.Contains(got, "completed") {
		t.Errorf("flash after the stream = %q, want the outcome", got)
	}
	if n := a.Refunds(t, order); n != 1 {
		t.Errorf("refunds = %d, want 1", n)
	}
}
