package main

// Real nginx and Caddy, each with an 8-second upstream read timeout
// (testdata/proxy, the configurations the README shows), in front of a
// "turnstile serve" child process: a streamed decision survives any length
// of continuation thanks to its keepalive lines, a plain POST that waits
// for the whole continuation meets the proxy's 504 (and the run finishes
// anyway), a plain POST with a worker alive never waits, and a stream the
// proxy cuts loses nothing but the stream.
//
// Each test has its own database and server and runs in parallel with the
// others. The runs mostly sleep, so a test starts all of its cases at once
// and then checks each in a subtest: it lasts as long as its longest case,
// about 30 seconds, whatever -parallel allows.

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// proxyKeepalive is --keepalive of the servers whose streams must survive
// the proxies: well below their read timeout.
const proxyKeepalive = 2 * time.Second

// slowYAML is the slow agent: once approved, 9 rounds of 3 seconds, the
// first 8 calling lookup_order, the last answering. Its continuation
// records 20 steps in 27 seconds, more than three read timeouts.
var slowYAML = pacedYAML("slow", 8, 3*time.Second, 0)

// silentYAML is an agent that, once approved, calls slow_task for 20
// seconds, during which nothing is recorded: 2.5 read timeouts of silence
// that only keepalive lines bridge. Its continuation records 6 steps:
// approval, refund, the round that calls slow_task, slow_task, the last
// round, the settle.
const silentYAML = `identifier: silent
name: silent
provider:
  type: scripted
  script:
    rounds:
      - text: "Refunding."
        tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}", reason: "silent"}
      - delay: 100ms
        text: "Writing the audit report."
        tool_calls:
          - name: slow_task
            arguments: {seconds: 20, label: "audit report"}
      - delay: 100ms
        text: "Done."
tools: [refund_order, slow_task]
max_iterations: 5
privacy_level: metadata
`

// silentSeconds is slow_task's silence in silentYAML, and silentStep the
// count of the step (the round that calls it) after which it starts.
const (
	silentSeconds = 20
	silentStep    = 3
)

func completedFlash(id int64) string {
	return fmt.Sprintf("You approved refund_order; run %d completed: the agent finished.", id)
}

// waitFlash loads /inbox until it shows a flash, and returns it. A load
// without a flash changes nothing in the session, so polling cannot lose
// one that a continuation stores meanwhile.
func waitFlash(t *testing.T, b *browser, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if f := b.inbox(t).flash; f != "" {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s/inbox showed no flash within %s", b.base, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// inboxView is what the operator's next GET /inbox shows of a run.
type inboxView struct {
	flash      string
	continuing bool // listed as continuing in the background
	waiting    bool // listed as waiting for a decision
}

func viewInbox(t *testing.T, b *browser, id int64) inboxView {
	t.Helper()
	status, body := b.get(t, "/inbox")
	if status != http.StatusOK {
		t.Fatalf("GET %s/inbox = %d:\n%s", b.base, status, body)
	}
	var v inboxView
	if f := flashDiv.FindStringSubmatch(body); f != nil {
		v.flash = strings.TrimSpace(unescapeHTML(f[1]))
	}
	v.continuing = strings.Contains(body, fmt.Sprintf(`data-testid="continuing-run" data-run-id="%d"`, id))
	v.waiting = strings.Contains(body, fmt.Sprintf(`data-testid="inbox-run" data-run-id="%d"`, id))
	return v
}

// checkContinuing asserts that a view showed the run continuing in the
// background, and no outcome yet.
func checkContinuing(t *testing.T, v inboxView, id int64, when string) {
	t.Helper()
	if !v.continuing || v.waiting || v.flash != "" {
		t.Errorf("the inbox %s shows run %d %+v, want it continuing, not waiting, and no flash yet", when, id, v)
	}
}

// startProxies starts one proxy of each kind in front of upstream.
func startProxies(t *testing.T, upstream string) map[string]*proxy {
	t.Helper()
	out := map[string]*proxy{}
	for _, k := range proxyKinds {
		out[k.name] = startProxy(t, k, upstream)
	}
	return out
}

// TestProxyStreamedDecisionSurvivesTheReadTimeout: through both proxies, a
// streamed decision of the slow agent (27 s) and of a 20-second silent tool
// call receives every line, promptly, in the inbox stream's order, and ends with
// settled: no silence ever reaches the proxies' 8 seconds.
func TestProxyStreamedDecisionSurvivesTheReadTimeout(t *testing.T) {
	t.Parallel()
	r := newRig(t, slowYAML, silentYAML)
	type streamCase struct {
		kind, name, configuration string
		w                         waitingRun
		p                         *proxy
		b                         *browser
		before                    int
		st                        *inboxStream
	}
	var cases []*streamCase
	for _, k := range proxyKinds {
		for _, c := range []struct{ name, configuration string }{{"slow agent", "slow"}, {"silent tool call", "silent"}} {
			cases = append(cases, &streamCase{kind: k.name, name: c.name, configuration: c.configuration, w: r.waiting(t, c.configuration)})
		}
	}
	s := startServe(t, r.DSN, "--keepalive", proxyKeepalive.String(), "--workers", "0")
	proxies := startProxies(t, s.addr)
	for _, c := range cases {
		if c.p = proxies[c.kind]; c.p.missing != "" {
			continue
		}
		c.b = signIn(t, c.p.addr, "operator")
		digest := c.b.digestOf(t, c.w.id)
		c.before = testrig.CountSteps(r.Gapless(t, c.w.id))
		c.st = c.b.stream(t, c.w.id, digest)
	}

	for _, c := range cases {
		t.Run(c.kind+"/"+c.name, func(t *testing.T) {
			c.p.require(t)
			w := c.w
			lines, err := c.st.Wait(t, 90*time.Second)
			end := c.st.EndedAt()
			if err != nil {
				t.Errorf("reading the stream through %s: %v", c.kind, err)
			}
			if got := r.Run(t, w.id); got.Status != runtime.StatusCompleted {
				t.Errorf("run %d after settled = %+v, want completed", w.id, got)
			}
			steps := testrig.CountSteps(r.Gapless(t, w.id)) - c.before
			checkInboxStream(t, lines, steps)
			checkExactlyOnce(t, r, w, 1)
			checkDecidedOnce(t, r, w, runtime.PathRequest)
			// A line every --keepalive at the latest, as it was sent:
			// neither a proxy's buffer nor a silence held one back.
			if got, limit := longestSilence(lines), proxyKeepalive+1500*time.Millisecond; got > limit {
				t.Errorf("the longest wait for a line through %s was %s, want at most %s (--keepalive %s):%s",
					c.kind, got, limit, proxyKeepalive, c.st)
			}
			keepalives := 0
			for _, l := range lines {
				if l.Type() == "keepalive" {
					keepalives++
				}
			}
			t.Logf("%d lines (%d steps, %d keepalives) in %.1fs, longest silence %s",
				len(lines), steps, keepalives, end.Seconds(), longestSilence(lines).Round(time.Millisecond))
			if c.configuration == "silent" {
				checkSilentStretch(t, lines)
			}
			if got, want := c.b.inbox(t).flash, completedFlash(w.id); got != want {
				t.Errorf("flash after settled = %q, want %q", got, want)
			}
		})
	}
}

// checkSilentStretch asserts that the 20-second silent call was bridged by
// keepalive lines alone: the step after it came at least 19 seconds after
// the one before it, with a keepalive every --keepalive between them.
func checkSilentStretch(t *testing.T, lines []testrig.Line) {
	t.Helper()
	var from, to time.Duration
	keepalives := 0
	for _, l := range lines {
		switch {
		case l.Type() == "progress" && l.Int("steps") == silentStep:
			from = l.At
		case l.Type() == "progress" && l.Int("steps") == silentStep+1:
			to = l.At
		case l.Type() == "keepalive" && l.Int("steps") == silentStep:
			keepalives++
		}
	}
	if gap := to - from; gap < (silentSeconds-1)*time.Second {
		t.Errorf("steps %d and %d came %s apart, want the %d-second silent call between them", silentStep, silentStep+1, gap, silentSeconds)
	}
	if want := int(silentSeconds*time.Second/proxyKeepalive) - 2; keepalives < want {
		t.Errorf("%d keepalive lines during the %d-second silent call, want at least %d", keepalives, silentSeconds, want)
	}
}

// nativeCase is a plain POST of an approval through one proxy, and what
// the operator saw right after its answer.
type nativeCase struct {
	w        waitingRun
	p        *proxy
	b        *browser
	answer   chan nativeDecision
	got      nativeDecision
	status   runtime.Status // the run's status when the answer came
	nextPage inboxView      // GET /inbox right after the answer
}

// decideThroughEach signs the operator in through each proxy, posts a
// plain approval of the proxy's run through it, all at once, and notes
// each answer with the run's status and the inbox right after it.
func decideThroughEach(t *testing.T, r *rig, proxies map[string]*proxy, runs map[string]waitingRun) map[string]*nativeCase {
	t.Helper()
	out := map[string]*nativeCase{}
	for name, p := range proxies {
		c := &nativeCase{w: runs[name], p: p, answer: make(chan nativeDecision, 1)}
		out[name] = c
		if p.missing != "" {
			continue
		}
		c.b = signIn(t, p.addr, "operator")
		digest := c.b.digestOf(t, c.w.id)
		go func() { c.answer <- postNative(c.b, c.w.id, digest) }()
	}
	for name, c := range out {
		if c.p.missing != "" {
			continue
		}
		select {
		case c.got = <-c.answer:
		case <-time.After(time.Minute):
			t.Fatalf("the plain POST through %s got no answer within a minute", name)
		}
		c.status = r.Run(t, c.w.id).Status
		c.nextPage = viewInbox(t, c.b, c.w.id)
	}
	return out
}

// TestProxyNativeDecisionOnTheRequestPathMeetsTheProxy504: with
// --decision-path request a plain POST waits for the whole continuation
// (27 s), so each proxy answers 504 at its 8-second read timeout while the
// run goes on; it completes on the server, and the operator's next inbox
// shows it continuing, then completed.
func TestProxyNativeDecisionOnTheRequestPathMeetsTheProxy504(t *testing.T) {
	t.Parallel()
	r := newRig(t, slowYAML)
	runs := map[string]waitingRun{}
	for _, k := range proxyKinds {
		runs[k.name] = r.waiting(t, "slow")
	}
	s := startServe(t, r.DSN, "--decision-path", "request", "--keepalive", proxyKeepalive.String(), "--workers", "0")
	decided := decideThroughEach(t, r, startProxies(t, s.addr), runs)

	for _, k := range proxyKinds {
		c := decided[k.name]
		t.Run(k.name, func(t *testing.T) {
			c.p.require(t)
			w, got := c.w, c.got
			t.Logf("%s answered the plain POST with %d after %s (%v)", k.name, got.status, got.took.Round(time.Millisecond), got.err)
			if got.err != nil || got.status != http.StatusGatewayTimeout {
				t.Errorf("plain POST through %s = %d (%v), want the proxy's 504", k.name, got.status, got.err)
			}
			if got.took < proxyReadTimeout-500*time.Millisecond || got.took > proxyReadTimeout+4*time.Second {
				t.Errorf("plain POST through %s answered after %s, want about its read timeout of %s", k.name, got.took, proxyReadTimeout)
			}
			if c.status != runtime.StatusRunning {
				t.Errorf("run %d at the 504 was %s, want still running", w.id, c.status)
			}
			checkContinuing(t, c.nextPage, w.id, "after the 504")
			r.WaitStatus(t, w.id, runtime.StatusCompleted, 60*time.Second)
			checkExactlyOnce(t, r, w, 1)
			checkDecidedOnce(t, r, w, runtime.PathRequest)
			if got, want := waitFlash(t, c.b, 10*time.Second), completedFlash(w.id); got != want {
				t.Errorf("flash once the run completed = %q, want %q", got, want)
			}
		})
	}
}

// TestProxyNativeDecisionWithAWorkerAnswersAtOnce: with --decision-path
// auto (the default) and the server's embedded workers alive, a plain POST
// of the same slow agent is recorded and answered with a 303 through either
// proxy in under a second; a worker finishes the run.
func TestProxyNativeDecisionWithAWorkerAnswersAtOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, slowYAML)
	runs := map[string]waitingRun{}
	for _, k := range proxyKinds {
		runs[k.name] = r.waiting(t, "slow")
	}
	s := startServe(t, r.DSN, "--decision-path", "auto", "--keepalive", proxyKeepalive.String(), "--workers", "2")
	waitWorkerRow(t, r, s.cmd.Process.Pid, 15*time.Second)
	decided := decideThroughEach(t, r, startProxies(t, s.addr), runs)

	for _, k := range proxyKinds {
		c := decided[k.name]
		t.Run(k.name, func(t *testing.T) {
			c.p.require(t)
			w, got := c.w, c.got
			t.Logf("%s answered the plain POST with %d after %s (%v)", k.name, got.status, got.took.Round(time.Millisecond), got.err)
			if where := fmt.Sprintf("/inbox/runs/%d", w.id); got.err != nil || got.status != http.StatusSeeOther || got.location != where {
				t.Errorf("plain POST through %s = %d to %q (%v), want 303 to %s, the run's page", k.name, got.status, got.location, got.err, where)
			}
			if got.took >= time.Second {
				t.Errorf("plain POST through %s answered after %s, want under a second", k.name, got.took)
			}
			if c.status == runtime.StatusCompleted {
				t.Errorf("run %d completed before the 303 was read: the POST waited for the continuation", w.id)
			}
			if got, want := c.nextPage.flash, recordedFlash(w.id); got != want || c.nextPage.waiting {
				t.Errorf("the inbox after the 303 shows run %d %+v, want the flash %q and the run no longer waiting", w.id, c.nextPage, want)
			}
			r.WaitStatus(t, w.id, runtime.StatusCompleted, 60*time.Second)
			checkExactlyOnce(t, r, w, 1)
			checkDecidedOnce(t, r, w, runtime.PathDurable)
		})
	}
}

// TestProxyCutStreamStillSettlesTheRun: a stream the proxy cuts — its read
// timeout running out because --keepalive (30 s) is set above it, or the
// proxy dying — ends without "settled", and the run goes on to its end on
// the server, inside the request that lost its client. What the page's
// script then loads, /inbox, shows the run continuing and, once it is
// done, its outcome.
func TestProxyCutStreamStillSettlesTheRun(t *testing.T) {
	t.Parallel()
	r := newRig(t, silentYAML)
	type cutCase struct {
		name   string
		kind   proxyKind
		kill   bool // kill the proxy at the silent call rather than let its read timeout cut
		w      waitingRun
		p      *proxy
		b      *browser // through the proxy, or, once it is killed, straight to the server
		st     *inboxStream
		killed time.Duration // when the proxy was killed, since the POST

		lines    []testrig.Line
		end      time.Duration  // when the body ended, since the POST
		err      error          // how it ended
		status   runtime.Status // the run's status then
		nextPage inboxView      // GET /inbox then: where the page's script goes
	}
	cases := []*cutCase{
		{name: "nginx read timeout", kind: nginxProxy},
		{name: "caddy read timeout", kind: caddyProxy},
		{name: "caddy killed", kind: caddyProxy, kill: true},
	}
	for _, c := range cases {
		c.w = r.waiting(t, "silent")
	}
	s := startServe(t, r.DSN, "--keepalive", "30s", "--workers", "0")
	for _, c := range cases {
		if c.p = startProxy(t, c.kind, s.addr); c.p.missing != "" {
			continue
		}
		c.b = signIn(t, c.p.addr, "operator")
		c.st = c.b.stream(t, c.w.id, c.b.digestOf(t, c.w.id))
	}
	for _, c := range cases {
		if c.kill && c.p.missing == "" {
			c.st.waitSteps(t, silentStep, 10*time.Second)
			c.killed = c.st.Elapsed()
			c.p.kill(t)
			// The page's script loads /inbox after the broken stream;
			// with the proxy dead, the server itself answers.
			c.b = &browser{base: "http://" + s.addr, client: c.b.client}
		}
	}
	// Every cut comes within the silent call: note each as it happens.
	for _, c := range cases {
		if c.p.missing == "" {
			c.lines, c.err = c.st.Wait(t, 20*time.Second)
			c.end = c.st.EndedAt()
			c.status = r.Run(t, c.w.id).Status
			c.nextPage = viewInbox(t, c.b, c.w.id)
		}
	}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.p.require(t)
			w := c.w
			t.Logf("the stream ended after %.1fs (read error: %v):%s", c.end.Seconds(), c.err, c.st)
			if len(c.lines) == 0 {
				t.Fatalf("the stream of run %d ended without a line", w.id)
			}
			last := c.lines[len(c.lines)-1]
			if last.Type() == "settled" || last.Int("steps") != silentStep {
				t.Errorf("last line = %s, want the body cut during the silent call, after step %d", last.Raw, silentStep)
			}
			silence := c.end - last.At
			switch {
			case c.kill && c.end-c.killed > 3*time.Second:
				t.Errorf("the stream ended %s after the proxy was killed, want at once", c.end-c.killed)
			case !c.kill && (silence < proxyReadTimeout-500*time.Millisecond || silence > proxyReadTimeout+4*time.Second):
				t.Errorf("%s cut the stream after %s of silence, want about its read timeout of %s", c.kind.name, silence, proxyReadTimeout)
			}
			if c.status != runtime.StatusRunning {
				t.Errorf("run %d when its stream was cut was %s, want still running", w.id, c.status)
			}
			checkContinuing(t, c.nextPage, w.id, "after the cut")
			r.WaitStatus(t, w.id, runtime.StatusCompleted, 40*time.Second)
			checkExactlyOnce(t, r, w, 1)
			checkDecidedOnce(t, r, w, runtime.PathRequest)
			if got, want := waitFlash(t, c.b, 10*time.Second), completedFlash(w.id); got != want {
				t.Errorf("flash once the run completed = %q, want %q", got, want)
			}
		})
	}
}
