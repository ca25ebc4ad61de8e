package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// burstResult is what the burst phase measured.
type burstResult struct {
	n         int
	surface   string
	keepalive time.Duration
	completed int // ended with "done"
	failures  int
	firstErr  string
	firstLine summary // POST → first line
	// gaps are the silences between consecutive lines of one stream after
	// its first line, as the client saw them, over every stream.
	gaps summary
	// late counts the streams with a gap longer than keepalive + 1 s;
	// worstAt is when the longest gap ended, from the first POST.
	late, timed          int
	worstAt              time.Duration
	worstBefore, worstTo string        // the kinds of the lines around the longest gap
	postTime             time.Duration // first POST sent to the last one's headers
	setupTime, phaseTime time.Duration
	cpu                  cpuSample
	// firstCPU is what the server, the database and this command used from
	// the first POST to the last first line: what the burst's first lines
	// cost, before any continuation goes on (with a hold of a few seconds).
	firstCPU       cpuSample
	firstClientCPU time.Duration // -1: unknown
	firstWall      time.Duration
}

func (r *burstResult) fail(err error) {
	failMu.Lock()
	defer failMu.Unlock()
	r.failures++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

// allowedGap is the longest silence the burst's target allows after a
// stream's first line.
func (r *burstResult) allowedGap() time.Duration { return r.keepalive + time.Second }

// burstPhase decides o.burstN waiting runs of the burst configuration,
// whose continuations work silently for --burst-hold after the approval,
// all in the same instant: one connection each, opened beforehand, and
// every POST released at once. It times each stream's first line and every
// silence after it, the target being that no stream stays silent longer
// than --keepalive + 1 s while the server works through the burst.
func (l *loadtest) burstPhase(ctx context.Context) *burstResult {
	o := l.o
	res := &burstResult{n: o.burstN, surface: o.burstSurface, keepalive: o.keepalive, cpu: unknownCPU, firstCPU: unknownCPU,
		firstClientCPU: -1}
	setupStart := time.Now()
	l.logf("burst: preparing %d waiting runs of %s", o.burstN, o.configID(configBurst))
	runs, err := l.prep.waitingRuns(ctx, o.configID(configBurst), o.burstN)
	var sessions []inboxSession
	if err == nil && o.burstSurface == surfaceInbox {
		sessions, err = l.db.inboxSessions(ctx, o.burstN)
	}
	if err == nil {
		// One connection per decision, or the burst would queue for
		// connections (and their handshakes) in this client instead of
		// reaching the server at once.
		err = l.warmUp(ctx, o.burstN)
	}
	res.setupTime = time.Since(setupStart)
	if err != nil {
		res.fail(err)
		return res
	}
	l.logf("burst: %d runs wait, %d connections open (%s)", len(runs), o.burstN, res.setupTime.Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(ctx, o.burstHold+10*time.Minute)
	defer cancel()
	var (
		mu             sync.Mutex
		firsts, gaps   []time.Duration
		worst          time.Duration
		worstEnd       time.Time
		worstKinds     [2]string
		late, timed    int
		lastHeaders    time.Duration // from the first POST
		start          time.Time
		cpuStart       cpuSample
		clientStart    time.Duration
		completed, got atomic.Int64
	)
	stopProgress := progress(l.stderr, 5*time.Second, func() string {
		return fmt.Sprintf("burst: %d first lines, %d done, %d failed", got.Load(), completed.Load(), res.failureCount())
	})
	gate := make(chan struct{})
	var wg sync.WaitGroup
	terminalWanted := "done"
	if o.burstSurface == surfaceInbox {
		terminalWanted = "settled"
	}
	for i, run := range runs {
		wg.Go(func() {
			<-gate
			sent := time.Now()
			var resp *http.Response
			var err error
			if sessions != nil {
				resp, err = l.c.decideInbox(ctx, run, sessions[i])
			} else {
				resp, err = l.c.decide(ctx, run, true)
			}
			if err != nil {
				res.fail(fmt.Errorf("run %d: %w", run.id, err))
				return
			}
			defer resp.Body.Close()
			mu.Lock()
			lastHeaders = max(lastHeaders, time.Since(start)) // start is set before the gate opens
			mu.Unlock()
			if resp.StatusCode != http.StatusOK {
				res.fail(fmt.Errorf("run %d: %s", run.id, answerError(resp)))
				return
			}
			var (
				last, myWorstEnd time.Time
				first, myWorst   time.Duration
				mine             []time.Duration
				terminal, lastEv string
				myKinds          [2]string
			)
			err = readLines(resp.Body, func(line []byte, at time.Time) bool {
				ev := lineEvent(line)
				if last.IsZero() {
					first = at.Sub(sent)
					if int(got.Add(1)) == len(runs) {
						// The last first line: what the first lines cost.
						res.firstCPU, res.firstWall = l.since(cpuStart), at.Sub(start)
						if c, err := cpuTime(os.Getpid()); err == nil && clientStart >= 0 {
							res.firstClientCPU = c - clientStart
						}
					}
				} else {
					gap := at.Sub(last)
					mine = append(mine, gap)
					if gap > myWorst {
						myWorst, myWorstEnd, myKinds = gap, at, [2]string{lastEv, ev}
					}
				}
				last, lastEv = at, ev
				if ev != lineStep && ev != lineKeepalive {
					terminal = ev
				}
				return true
			})
			mu.Lock()
			if !last.IsZero() {
				firsts = append(firsts, first)
				gaps = append(gaps, mine...)
				timed++
				if myWorst > res.allowedGap() {
					late++
				}
				if myWorst > worst {
					worst, worstEnd, worstKinds = myWorst, myWorstEnd, myKinds
				}
			}
			mu.Unlock()
			switch {
			case err != nil:
				res.fail(fmt.Errorf("run %d: stream broke: %w", run.id, err))
			case terminal != terminalWanted:
				res.fail(fmt.Errorf("run %d: stream ended with %q, not %s", run.id, terminal, terminalWanted))
			default:
				completed.Add(1)
			}
		})
	}
	cpuStart, clientStart = l.cpu(), time.Duration(-1)
	if c, err := cpuTime(os.Getpid()); err == nil {
		clientStart = c
	}
	start = time.Now()
	close(gate)
	wg.Wait()
	stopProgress()
	res.phaseTime, res.cpu = time.Since(start), l.since(cpuStart)
	res.completed, res.late, res.timed = int(completed.Load()), late, timed
	res.firstLine, res.gaps = summarize(firsts), summarize(gaps)
	if !worstEnd.IsZero() {
		res.worstAt = worstEnd.Sub(start)
		res.worstBefore, res.worstTo = worstKinds[0], worstKinds[1]
	}
	res.postTime = lastHeaders
	return res
}

// failureCount is how many streams failed so far.
func (r *burstResult) failureCount() int {
	failMu.Lock()
	defer failMu.Unlock()
	return r.failures
}

// rows are the burst's lines of the table: the silences, judged against
// --keepalive + 1 s, and the first lines, a stress figure.
func (r *burstResult) rows() []row {
	label := fmt.Sprintf("burst of %s (%s): silence between two lines of a stream after its first, p50 / p99 (max)", fmtInt(r.n), r.surface)
	target := fmt.Sprintf("every gap ≤ %s (--keepalive + 1 s)", fmtDur(r.allowedGap()))
	rows := []row{}
	if r.gaps.n == 0 {
		rows = append(rows, row{label, "no gap timed: " + r.firstErr, target, verdict(false)})
	} else {
		measured := fmt.Sprintf("%s / %s (%s); %s of %s streams had a longer gap", fmtDur(r.gaps.p50), fmtDur(r.gaps.p99),
			fmtDur(r.gaps.max), fmtInt(r.late), fmtInt(r.timed))
		rows = append(rows, row{label, measured, target, verdict(r.failures == 0 && r.late == 0 && r.timed == r.n)})
	}
	flabel := fmt.Sprintf("burst of %s (%s): POST → first line p50 / p99", fmtInt(r.n), r.surface)
	if r.firstLine.n == 0 {
		rows = append(rows, row{flabel, "no first line: " + r.firstErr, "— (a stress figure)", "—"})
	} else {
		rows = append(rows, row{flabel, fmt.Sprintf("%s / %s (max %s)", fmtDur(r.firstLine.p50), fmtDur(r.firstLine.p99), fmtDur(r.firstLine.max)),
			"— (a stress figure)", "—"})
	}
	return rows
}

// line is the burst's line under the table.
func (r *burstResult) line() string {
	return fmt.Sprintf("- burst: %s runs prepared and as many connections opened in %s; all %s posted at once, the last answered (headers) %s after the first;"+
		" the longest gap (from a %s line to a %s line) ended %s after the first POST; phase %s; %s completed%s\n",
		fmtInt(r.n), fmtDur(r.setupTime), fmtInt(r.n), fmtDur(r.postTime), r.worstBefore, r.worstTo, fmtDur(r.worstAt), fmtDur(r.phaseTime), fmtInt(r.completed),
		cpuNote(r.cpu, r.n, "decision")+failureNote(r.failures, r.firstErr)) + r.firstCPULine()
}

// firstCPULine says what the first lines cost, when it was measured.
func (r *burstResult) firstCPULine() string {
	if r.firstWall == 0 {
		return ""
	}
	client := ""
	if r.firstClientCPU >= 0 {
		client = fmt.Sprintf(", this command CPU %s (%s per decision)", fmtDur(r.firstClientCPU), fmtDur(r.firstClientCPU/time.Duration(r.n)))
	}
	return fmt.Sprintf("- burst: to the last first line, %s after the first POST%s%s\n", fmtDur(r.firstWall), cpuNote(r.firstCPU, r.n, "decision"), client)
}
