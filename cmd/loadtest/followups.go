package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// The followups phase: does a long transcript make a turn slow? It
// prepares --followups-n settled runs, each with --followup-turns turns
// already done (every turn a message, a round that calls slow_task for
// 0 s, its result and an answer), then times, in the same invocation, the
// first line of two kinds of streamed request, --followups-in-flight of
// each kind kept in flight: (a) first turns, POST /api/runs of the same
// configuration, and (b) follow-ups, POST /api/runs/:id/messages to
// distinct settled runs, whose turn starts by reading the whole
// transcript. The two alternate in --followups-rounds rounds, (a) first in
// the even rounds and (b) first in the odd ones, so that the machine's
// noise falls on both alike. The target: a follow-up's first line within
// 1.2× a first turn's, p50 and p99.

// conversationConfig is the phase's configuration: a round that calls
// slow_task for 0 s (read-only, no approval), then an answer; the
// scripted model plays it again for every turn's message, so each turn
// adds a user message, an assistant message with a tool call, its result
// and an answer to the transcript.
const conversationConfigID = "loadtest-conversation"

func conversationConfig() (identifier, yaml string) {
	return conversationConfigID, `identifier: ` + conversationConfigID + `
name: Load test (a turn with a tool call, no pause)
active: true
system_prompt: You look something up, then answer.
provider:
  type: scripted
  script:
    rounds:
      - text: "Looking it up."
        tool_calls:
          - name: slow_task
            arguments: {seconds: 0, label: "lookup"}
      - text: "Here is what I found: nothing that needs a person."
tools: [slow_task]
max_iterations: 3
privacy_level: metadata
`
}

// conversationPreparer makes the settled runs the followups phase sends
// its messages to.
type conversationPreparer interface {
	// conversations saves the phase's configuration and returns n runs
	// of it, each settled after turns turns.
	conversations(ctx context.Context, n, turns int) (configuration string, runs []int64, err error)
}

// followupsResult is what the followups phase measured.
type followupsResult struct {
	n, inFlight, turns, rounds int
	first, firstHeaders        summary // (a) first turns: POST /api/runs
	next, nextHeaders          summary // (b) follow-ups: POST /api/runs/:id/messages
	completed                  int
	failures                   int
	firstErr                   string
	setupTime, phaseTime       time.Duration
	cpu                        cpuSample // used by both kinds of turn
}

func (r *followupsResult) fail(err error) {
	failMu.Lock()
	defer failMu.Unlock()
	r.failures++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

// targetFollowupRatio bounds a follow-up's first line against a first
// turn's.
const targetFollowupRatio = 1.2

// ratio is b's duration over a's; 0 when a is unknown.
func ratio(b, a time.Duration) float64 {
	if a <= 0 {
		return 0
	}
	return float64(b) / float64(a)
}

// followupsPhase runs the phase.
func (l *loadtest) followupsPhase(ctx context.Context) *followupsResult {
	o := l.o
	res := &followupsResult{n: o.followupsN, inFlight: o.followupsInFlight, turns: o.followupTurns,
		rounds: o.followupsRounds, cpu: unknownCPU}
	prep, ok := l.prep.(conversationPreparer)
	if !ok {
		res.fail(errors.New("the followups phase needs --dsn: it prepares its settled runs through the engine"))
		return res
	}
	setupStart := time.Now()
	l.logf("followups: preparing %d runs of %d turns each", o.followupsN, o.followupTurns)
	configuration, runs, err := prep.conversations(ctx, o.followupsN, o.followupTurns)
	res.setupTime = time.Since(setupStart)
	if err != nil {
		res.fail(err)
		return res
	}
	l.logf("followups: %d runs prepared in %s", len(runs), res.setupTime.Round(time.Millisecond))
	if err := l.warmUp(ctx, o.followupsInFlight); err != nil {
		res.fail(err)
		return res
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	var (
		completed                            atomic.Int64
		firsts, firstHeads, nexts, nextHeads []time.Duration
		firstPart, nextPart                  func(round int)
		perRound                             = o.followupsN / o.followupsRounds
		startBody                            = func(i int) []byte { return startBody(configuration, i) }
		messageBody                          = []byte(`{"content":"And one more thing: look it up again, please."}`)
		nextRun                              int
		firstIndex                           int
	)
	firstPart = func(round int) {
		t := l.keepInFlight(pctx, res, perRound, o.followupsInFlight, &completed, func(int) (string, []byte) {
			firstIndex++
			return "/api/runs", startBody(firstIndex)
		})
		firsts, firstHeads = append(firsts, t.firsts...), append(firstHeads, t.headers...)
		l.logf("followups: round %d of %d: %d first turns with %d in flight", round+1, o.followupsRounds, perRound, o.followupsInFlight)
	}
	nextPart = func(round int) {
		batch := runs[nextRun : nextRun+perRound]
		nextRun += perRound
		t := l.keepInFlight(pctx, res, perRound, o.followupsInFlight, &completed, func(k int) (string, []byte) {
			return fmt.Sprintf("/api/runs/%d/messages", batch[k]), messageBody
		})
		nexts, nextHeads = append(nexts, t.firsts...), append(nextHeads, t.headers...)
		l.logf("followups: round %d of %d: %d follow-ups with %d in flight", round+1, o.followupsRounds, perRound, o.followupsInFlight)
	}
	cpuStart := l.cpu()
	start := time.Now()
	for round := range o.followupsRounds {
		if round%2 == 0 {
			firstPart(round)
			nextPart(round)
		} else {
			nextPart(round)
			firstPart(round)
		}
	}
	res.phaseTime, res.cpu = time.Since(start), l.since(cpuStart)
	res.first, res.firstHeaders = summarize(firsts), summarize(firstHeads)
	res.next, res.nextHeaders = summarize(nexts), summarize(nextHeads)
	res.completed = int(completed.Load())
	return res
}

// startBody is a first turn's body.
func startBody(configuration string, i int) []byte {
	b, _ := json.Marshal(map[string]any{"configuration": configuration, "prompt": fmt.Sprintf("load test conversation %d", i)})
	return b
}

// keepInFlight posts n streamed requests from k clients, each of which
// posts its next as soon as its last stream ended, so that k are in
// flight at all times; request(i) is the i-th's path and body. Every
// stream must end with "done". It returns the times from sending each
// POST to its headers and its first line. Calls of request are
// serialised.
func (l *loadtest) keepInFlight(ctx context.Context, res *followupsResult, n, k int, completed *atomic.Int64,
	request func(i int) (string, []byte)) steadyTimes {
	var (
		mu   sync.Mutex // out and request
		out  steadyTimes
		next atomic.Int64
		open atomic.Int64
		wg   sync.WaitGroup
	)
	for range min(k, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				mu.Lock()
				path, body := request(i)
				mu.Unlock()
				posted := int(open.Add(1))
				head, first, ok := l.c.streamPost(ctx, path, body, res, completed)
				open.Add(-1)
				mu.Lock()
				out.inFlight = append(out.inFlight, posted)
				if ok {
					out.headers = append(out.headers, head)
					out.firsts = append(out.firsts, first)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// streamPost posts a JSON body asking for NDJSON and reads the stream to
// its end: the times from sending to the headers and to the first line,
// ok when there was one. A stream that breaks or does not end with
// "done" is a failure; one that does counts in completed.
func (c *client) streamPost(ctx context.Context, path string, body []byte, res *followupsResult, completed *atomic.Int64) (head, first time.Duration, ok bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		res.fail(err)
		return 0, 0, false
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	sent := time.Now()
	resp, err := c.http.Do(req)
	head = time.Since(sent)
	if err != nil {
		res.fail(fmt.Errorf("POST %s: %w", path, err))
		return 0, 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		res.fail(fmt.Errorf("POST %s: %s", path, answerError(resp)))
		return 0, 0, false
	}
	terminal := ""
	err = readLines(resp.Body, func(line []byte, at time.Time) bool {
		if !ok {
			ok, first = true, at.Sub(sent)
		}
		if ev := lineEvent(line); ev != lineStep && ev != lineKeepalive {
			terminal = ev
		}
		return true
	})
	switch {
	case err != nil:
		res.fail(fmt.Errorf("POST %s: stream broke: %w", path, err))
	case terminal != "done":
		res.fail(fmt.Errorf("POST %s: stream ended with %q, not done", path, terminal))
	default:
		completed.Add(1)
	}
	return head, first, ok
}

// conversations saves the phase's configuration and prepares n runs of
// it through the engine, each settled after turns turns: the first
// prompt, then turns-1 follow-up messages, each carried out to its end.
func (d *database) conversations(ctx context.Context, n, turns int) (string, []int64, error) {
	id, text := conversationConfig()
	if err := d.saveConfig(ctx, id, text); err != nil {
		return "", nil, err
	}
	runs := make([]int64, n)
	settle := func(c *runtime.Continuation, turn int) (int64, error) {
		out := c.Run(ctx, nil)
		if out.Err != nil {
			return out.RunID, fmt.Errorf("run %d, turn %d: %w", out.RunID, turn, out.Err)
		}
		if out.Status != runtime.StatusCompleted {
			return out.RunID, fmt.Errorf("run %d, turn %d: %s, not completed (%s)", out.RunID, turn, out.Status, out.Detail)
		}
		return out.RunID, nil
	}
	err := parallel(ctx, n, d.concurrency, func(ctx context.Context, i int) error {
		c, err := d.engine.Start(ctx, runtime.StartRequest{Configuration: id,
			Prompt: fmt.Sprintf("load test conversation %d: look something up", i+1), Owner: d.owner})
		if err != nil {
			return fmt.Errorf("start a run of %s: %w", id, err)
		}
		if runs[i], err = settle(c, 1); err != nil {
			return err
		}
		for turn := 2; turn <= turns; turn++ {
			c, err := d.engine.SendMessage(ctx, runtime.MessageRequest{RunID: runs[i],
				Content: fmt.Sprintf("Turn %d: look it up again, please.", turn), Actor: d.owner})
			if err != nil {
				return fmt.Errorf("run %d, turn %d: %w", runs[i], turn, err)
			}
			if _, err := settle(c, turn); err != nil {
				return err
			}
		}
		return nil
	})
	d.release()
	return id, runs, err
}

// rows are the phase's lines of the table.
func (r *followupsResult) rows() []row {
	firstLabel := fmt.Sprintf("first turn: POST /api/runs → first line p50 / p99, %d in flight", r.inFlight)
	nextLabel := fmt.Sprintf("follow-up after %d turns: POST /api/runs/:id/messages → first line p50 / p99, %d in flight", r.turns, r.inFlight)
	ratioLabel := "follow-up / first turn, first line p50 / p99"
	const target = "≤ 1.2× / ≤ 1.2×"
	measured := func(s, h summary) string {
		if s.n == 0 {
			return "no first line: " + r.firstErr
		}
		return fmt.Sprintf("%s / %s (%s turns; headers %s / %s; max %s)", fmtDur(s.p50), fmtDur(s.p99), fmtInt(s.n),
			fmtDur(h.p50), fmtDur(h.p99), fmtDur(s.max))
	}
	rows := []row{{firstLabel, measured(r.first, r.firstHeaders), "—", "—"}, {nextLabel, measured(r.next, r.nextHeaders), "—", "—"}}
	if r.first.n == 0 || r.next.n == 0 {
		return append(rows, row{ratioLabel, "not measured", target, verdict(false)})
	}
	p50, p99 := ratio(r.next.p50, r.first.p50), ratio(r.next.p99, r.first.p99)
	ok := r.failures == 0 && p50 <= targetFollowupRatio && p99 <= targetFollowupRatio
	return append(rows, row{ratioLabel, fmt.Sprintf("%.2f× / %.2f×", p50, p99), target, verdict(ok)})
}

// line is the phase's line under the table.
func (r *followupsResult) line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "- followups: %s runs of %d turns each (a tool call and an answer per turn) prepared in %s;"+
		" %d rounds of %s first turns and %s follow-ups, %d of each kind in flight, alternating, in %s; %s completed%s\n",
		fmtInt(r.n), r.turns, fmtDur(r.setupTime), r.rounds, fmtInt(r.n/max(r.rounds, 1)), fmtInt(r.n/max(r.rounds, 1)),
		r.inFlight, fmtDur(r.phaseTime), fmtInt(r.completed), cpuNote(r.cpu, 2*r.n, "turn")+failureNote(r.failures, r.firstErr))
	return b.String()
}
