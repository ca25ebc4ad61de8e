package web_test

// Fault tests: clients that leave a streamed decision, a follower of a
// continuation that a worker carries out, and a stream cut between the
// server and a browser. In every case the run goes on server-side, once.

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
	"github.com/turnstile-dev/turnstile/web"
)

// hasty is slow's shorter sibling: after the refund, two rounds of 200 ms,
// so a hundred continuations at once still end within seconds.
func init() {
	testConfigs = append(testConfigs, `
identifier: hasty
name: Hasty
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - delay: 200ms
        tool_calls: [{name: lookup_order, arguments: {order_id: "${order_id}"}}]
      - delay: 200ms
        text: "done"
tools: [lookup_order, refund_order]
`)
}

// wantConsecutive checks a run's stored events: seqs 1..n without a gap,
// one approval, and a settle last.
func wantConsecutive(t *testing.T, a *testApp, id int64) {
	t.Helper()
	evs := a.Gapless(t, id)
	if testrig.CountKind(evs, runtime.KindApproval) != 1 || len(evs) == 0 || evs[len(evs)-1].Kind != runtime.KindSettle {
		var kinds []runtime.EventKind
		for _, e := range evs {
			kinds = append(kinds, e.Kind)
		}
		t.Errorf("run %d: event kinds = %v, want one approval and a settle last", id, kinds)
	}
}

// TestClientAbortOnAHundredStreams: a hundred streamed approvals at once,
// by two people (one may have 64 streams open), each client gone after
// the first line; every run still completes, with one refund and a
// gapless event log.
func TestClientAbortOnAHundredStreams(t *testing.T) {
	const n = 100
	a := newApp(t, 0)
	type pending struct {
		paused runtime.Outcome
		order  string
	}
	runs := make([]pending, n)
	for i := range runs {
		runs[i].paused, runs[i].order = a.Waiting(t, "hasty")
	}
	people := []*client{a.signIn(t, "approver"), a.signIn(t, "admin")}
	reqs := make([]*http.Request, n)
	for i, r := range runs {
		reqs[i] = people[i%2].postRequest(inboxPath(r.paused.RunID, "decision"), approve(r.paused.Digest), "application/x-ndjson")
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			<-start
			res, err := people[i%2].http.Do(req)
			if err != nil {
				t.Errorf("run %d: %v", runs[i].paused.RunID, err)
				return
			}
			s := testrig.Read(t, res.Body, time.Now())
			defer s.Close() // the client goes away after the first line
			if res.StatusCode != http.StatusOK {
				t.Errorf("run %d: status %d, want 200 and a stream", runs[i].paused.RunID, res.StatusCode)
				return
			}
			line, err := s.Line(0, 30*time.Second)
			if err != nil || !strings.Contains(line.Raw, `"progress"`) {
				t.Errorf("run %d: first line %q, %v", runs[i].paused.RunID, line, err)
			}
		})
	}
	close(start)
	wg.Wait()

	// The test's database holds these runs only.
	var completed int
	if !testrig.Eventually(60*time.Second, func() bool {
		completed = a.Count(t, `SELECT COUNT(*) FROM runs WHERE status = ?`, runtime.StatusCompleted)
		return completed == n
	}) {
		t.Fatalf("%d of %d runs completed 60 s after their clients left", completed, n)
	}
	for _, r := range runs {
		if got := a.Refunds(t, r.order); got != 1 {
			t.Errorf("run %d: refunds of %s = %d, want 1", r.paused.RunID, r.order, got)
		}
		if got := len(a.Decisions(t, r.paused.RunID)); got != 1 {
			t.Errorf("run %d: decisions = %d, want 1", r.paused.RunID, got)
		}
		wantConsecutive(t, a, r.paused.RunID)
	}
}

// TestEventsFollowAWorkersContinuation: a decision on the durable path
// leaves the run decided; a follower attached then sees the steps the
// worker records, live, with consecutive seqs, then end with completed.
func TestEventsFollowAWorkersContinuation(t *testing.T) {
	a := newApp(t, 0, func(d *web.Deps) { d.DecisionPath = web.PathDurable })
	paused, order := a.Waiting(t, "slow")
	before := len(a.Events(t, paused.RunID))

	res, _ := a.signIn(t, "approver").post(inboxPath(paused.RunID, "decision"), approve(paused.Digest))
	// The durable answer lands on the run's own page, which shows the
	// outcome once there is one.
	wantRedirect(t, res, fmt.Sprintf("/inbox/runs/%d", paused.RunID))
	if got := a.Run(t, paused.RunID).Status; got != runtime.StatusDecided {
		t.Fatalf("after a durable decision the run is %s, want %s", got, runtime.StatusDecided)
	}
	if n := len(a.Events(t, paused.RunID)); n != before {
		t.Fatalf("a durable decision recorded %d events, want none (the worker applies it)", n-before)
	}

	_, lines := openEvents(t, a.signIn(t, "owner"), paused.RunID, fmt.Sprintf("after_seq=%d&follow=true", before))
	att := lines.Next(t, 5*time.Second)
	if att.Type() != "attached" || att.Value["live"] != true || att.Value["status"] != string(runtime.StatusDecided) ||
		att.Int("first_seq") != before+1 || att.Int("latest_seq") != before {
		t.Fatalf("first line = %s, want attached to a live, decided run, first_seq %d, latest_seq %d", att.Raw, before+1, before)
	}

	testrig.Work(t, a.Engine, 1, 20*time.Millisecond)
	first := lines.Next(t, 10*time.Second)
	// The slow script sleeps 900 ms after the approval: a follower sees
	// the approval while the worker still holds the run.
	if status := a.Run(t, paused.RunID).Status; status != runtime.StatusRunning {
		t.Errorf("when the first event line arrived the run was %s, want %s (the follower is live)", status, runtime.StatusRunning)
	}
	got := append([]testrig.Line{first}, lines.Rest(t, 20*time.Second)...)
	if end := got[len(got)-1]; end.Type() != "end" || end.Value["status"] != string(runtime.StatusCompleted) {
		t.Fatalf("lines = %v, want events then end with completed", got)
	}
	for _, l := range got[:len(got)-1] {
		if l.Type() != "event" && l.Type() != "keepalive" {
			t.Errorf("unexpected line %s", l.Raw)
		}
	}
	wantSeqs, wantKinds := a.storedSeqs(t, paused.RunID)
	if gotSeqs := eventSeqs(t, got); !slices.Equal(gotSeqs, wantSeqs[before:]) || len(gotSeqs) == 0 {
		t.Errorf("event seqs = %v, want the worker's %v", gotSeqs, wantSeqs[before:])
	}
	var gotKinds []string
	for _, l := range got {
		if l.Type() == "event" {
			gotKinds = append(gotKinds, fmt.Sprint(l.Value["kind"]))
		}
	}
	if !slices.Equal(gotKinds, wantKinds[before:]) || len(gotKinds) == 0 || gotKinds[0] != string(runtime.KindApproval) {
		t.Errorf("event kinds = %v, want the worker's %v, the approval first", gotKinds, wantKinds[before:])
	}
	wantSettled(t, a, paused.RunID, order)
}

// decisionPath is an inbox decision's path.
var decisionPath = regexp.MustCompile(`^/inbox/runs/[^/]+/decision$`)

// streamCutter sits in front of the app like a proxy that breaks
// connections: a streamed inbox decision gets its first line, then its
// connection is closed. The handler behind it goes on with the
// continuation, its writes failing.
type streamCutter struct {
	next http.Handler
	cuts atomic.Int32
	// served gets, for every streamed decision, whether it was cut, once
	// its handler returned.
	served chan bool
}

func (c *streamCutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.Contains(r.Header.Get("Accept"), "application/x-ndjson") ||
		!decisionPath.MatchString(r.URL.Path) {
		c.next.ServeHTTP(w, r)
		return
	}
	cw := &cuttingWriter{ResponseWriter: w, onCut: func() { c.cuts.Add(1) }}
	c.next.ServeHTTP(cw, r)
	cw.mu.Lock()
	cut := cw.cut
	cw.mu.Unlock()
	c.served <- cut
}

// cuttingWriter passes writes through until a flush has sent a whole line,
// then hijacks the connection and closes it. Afterwards every write and
// flush fails, as on a connection the peer dropped, and none reaches the
// hijacked response (whose Flush would panic).
type cuttingWriter struct {
	http.ResponseWriter
	onCut func()

	mu   sync.Mutex
	line bool // a whole line was written
	cut  bool
}

func (w *cuttingWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut {
		return 0, net.ErrClosed
	}
	n, err := w.ResponseWriter.Write(b)
	if bytes.IndexByte(b[:n], '\n') >= 0 {
		w.line = true
	}
	return n, err
}

func (w *cuttingWriter) FlushError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut {
		return net.ErrClosed
	}
	rc := http.NewResponseController(w.ResponseWriter)
	if err := rc.Flush(); err != nil || !w.line {
		return err
	}
	conn, _, err := rc.Hijack()
	if err != nil {
		return err
	}
	w.cut = true
	conn.Close()
	w.onCut()
	return nil
}

func (w *cuttingWriter) SetWriteDeadline(d time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut {
		return net.ErrClosed
	}
	return http.NewResponseController(w.ResponseWriter).SetWriteDeadline(d)
}

func (w *cuttingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestBrowserCutStreamLandsOnTheInbox: with JavaScript, a decision stream
// cut after its first line sends the page to /inbox, and the run completes
// server-side, once.
func TestBrowserCutStreamLandsOnTheInbox(t *testing.T) {
	a := newApp(t, 0)
	cutter := &streamCutter{next: a.srv.Config.Handler, served: make(chan bool, 4)}
	proxy := httptest.NewServer(cutter)
	t.Cleanup(proxy.Close)
	// Every helper from here on (the tab, the clients) goes through the
	// cutter; newApp's cleanup still closes the server behind it.
	a.srv = proxy

	paused, order := a.Waiting(t, "slow")
	b := openTab(t, a, true)
	b.signIn("approver")
	sel := runSelector(paused.RunID)

	// A mark on the signed-in inbox tells it apart from the /inbox the
	// script loads: a new document has none.
	get(b, "mark the page", chromedp.Evaluate[bool](`window.__turnstileBeforeCut = true`))
	b.do("click Approve", stepTimeout, chromedp.Click(chromedp.CSS(sel+` button[name="decision"][value="approve"]`)))

	var cut bool
	select {
	case cut = <-cutter.served:
	case <-time.After(settleTimeout):
		t.Fatal("the streamed decision's handler did not return")
	}
	if !cut || cutter.cuts.Load() != 1 {
		t.Fatalf("the decision stream was cut %d times (last cut: %v), want once", cutter.cuts.Load(), cut)
	}

	deadline := time.Now().Add(settleTimeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, time.Second)
		// Errors while the page navigates are expected: poll again.
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](
			`location.pathname + (window.__turnstileBeforeCut ? ' (old page)' : '') + ' ' + document.readyState`))
		cancel()
		if err == nil && got == "/inbox complete" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tab did not load /inbox again after the cut (last %q, %v)\n%s", got, err, b.where())
		}
		time.Sleep(50 * time.Millisecond)
	}

	posts := b.posts(inboxPath(paused.RunID, "decision"))
	if len(posts) != 1 || posts[0].kind != network.ResourceTypeFetch || posts[0].status != 200 {
		t.Errorf("decision requests = %+v, want one streamed fetch answered 200 (no native resubmission)", posts)
	}
	a.WaitStatus(t, paused.RunID, runtime.StatusCompleted, settleTimeout)
	wantSettled(t, a, paused.RunID, order)
	select {
	case again := <-cutter.served:
		t.Errorf("a second streamed decision reached the server (cut: %v)", again)
	default:
	}
}
