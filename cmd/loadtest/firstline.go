package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// firstLineResult is what the first-line phase measured.
type firstLineResult struct {
	n, rounds, serialN int
	firstLine, headers summary // the bursts: n decisions posted in the same instant
	serial             summary // one decision at a time: the floor under no contention
	// The steady part: steadyN clients kept that many decisions in flight
	// until steadyDecisions were posted.
	steadyN, steadyDecisions int
	steady, steadyHeaders    summary
	steadyInFlight           int // median of the streams open when a decision was posted, its own included
	steadyTime               time.Duration
	completed                int
	failures                 int
	firstErr                 string
	setupTime, phaseTime     time.Duration
	cpu                      cpuSample // used by the decisions and their continuations
}

// decisions is how many decisions the phase posts in all its parts.
func (r *firstLineResult) decisions() int {
	return r.serialN + r.steadyDecisions + r.n*r.rounds
}

// steadyRate is the steady part's decisions per second: about steadyN
// per hold when they are really in flight together.
func (r *firstLineResult) steadyRate() float64 {
	if r.steadyTime <= 0 {
		return 0
	}
	return float64(r.steadyDecisions) / r.steadyTime.Seconds()
}

func (r *firstLineResult) fail(err error) {
	failMu.Lock()
	defer failMu.Unlock()
	r.failures++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

// firstLinePhase posts streamed decisions and times each from sending its
// POST to its response headers and to its first line: o.firstLineSerial
// one at a time, for the floor; then o.steadyDecisions from o.steadyN
// clients that each post their next as soon as their last stream ended, so
// that o.steadyN are in flight at all times (the target's reading of "100
// concurrent decisions"); then o.firstLineN at the same moment,
// o.firstLineRounds times, a stress figure. The continuations work
// silently for --first-line-hold after that line, so a decision's time is
// not shared with the steps of those before it; each part and each round
// starts when the previous one's streams ended.
func (l *loadtest) firstLinePhase(ctx context.Context) *firstLineResult {
	o := l.o
	res := &firstLineResult{n: o.firstLineN, rounds: o.firstLineRounds, serialN: o.firstLineSerial,
		steadyN: o.steadyN, steadyDecisions: o.steadyDecisions, cpu: unknownCPU}
	total := res.decisions()
	setupStart := time.Now()
	l.logf("first-line: preparing %d waiting runs of %s", total, o.configID(configFirstLine))
	runs, err := l.prep.waitingRuns(ctx, o.configID(configFirstLine), total)
	res.setupTime = time.Since(setupStart)
	if err != nil {
		res.fail(err)
		return res
	}
	// A client that decides often keeps its connections: open them first,
	// so the parts time the server rather than TCP handshakes.
	if err := l.warmUp(ctx, max(o.firstLineN, o.steadyN)); err != nil {
		res.fail(err)
		return res
	}
	d := &firstLineDecider{l: l, res: res}
	var (
		mu              sync.Mutex
		firsts, headers []time.Duration
		serial          []time.Duration
	)
	// The steady part lasts about steadyDecisions/steadyN holds, plus one
	// for its staggered start.
	holds := o.firstLineRounds + o.steadyDecisions/o.steadyN + 2
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(holds)*o.firstLineHold)
	defer cancel()
	cpuStart := l.cpu()
	start := time.Now()
	for _, run := range runs[:o.firstLineSerial] {
		if _, first, _, ok := d.one(pctx, run); ok {
			serial = append(serial, first)
		}
	}
	// The steady part starts with every earlier continuation ended.
	d.drains.Wait()
	if o.firstLineSerial > 0 {
		l.logf("first-line: %d decisions one at a time done", o.firstLineSerial)
	}
	runs = runs[o.firstLineSerial:]

	steadyStart := time.Now()
	steady := d.steady(pctx, runs[:o.steadyDecisions])
	res.steadyTime = time.Since(steadyStart)
	res.steady, res.steadyHeaders, res.steadyInFlight = summarize(steady.firsts), summarize(steady.headers), median(steady.inFlight)
	d.drains.Wait()
	l.logf("first-line: %d decisions with %d in flight done (median in flight %d)", o.steadyDecisions, o.steadyN, res.steadyInFlight)
	runs = runs[o.steadyDecisions:]

	for round := range o.firstLineRounds {
		batch := runs[round*o.firstLineN : (round+1)*o.firstLineN]
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for _, run := range batch {
			wg.Go(func() {
				<-gate
				head, first, _, ok := d.one(pctx, run)
				if !ok {
					return
				}
				mu.Lock()
				headers = append(headers, head)
				firsts = append(firsts, first)
				mu.Unlock()
			})
		}
		close(gate)
		wg.Wait()
		d.drains.Wait()
		l.logf("first-line: round %d of %d done", round+1, o.firstLineRounds)
		if round+1 < o.firstLineRounds {
			time.Sleep(500 * time.Millisecond)
		}
	}
	res.phaseTime, res.cpu = time.Since(start), l.since(cpuStart)
	res.firstLine, res.headers, res.serial = summarize(firsts), summarize(headers), summarize(serial)
	res.completed = int(d.completed.Load())
	return res
}

// firstLineDecider posts the first-line phase's decisions and reads their
// streams to their ends.
type firstLineDecider struct {
	l         *loadtest
	res       *firstLineResult
	drains    sync.WaitGroup // the streams being read past their first line
	completed atomic.Int64   // streams that ended with "done"
}

// one decides one run and returns at its first line, with the times from
// sending the POST to the response's headers and to that line. The rest of
// the stream is read to its end in the background, under drains; ended is
// closed then (at once when there was no stream).
func (d *firstLineDecider) one(ctx context.Context, run waitingRun) (head, first time.Duration, ended <-chan struct{}, ok bool) {
	end := make(chan struct{})
	sent := time.Now()
	resp, err := d.l.c.decide(ctx, run, true)
	head = time.Since(sent)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = errors.New(answerError(resp))
		resp.Body.Close()
	}
	if err != nil {
		d.res.fail(fmt.Errorf("run %d: %w", run.id, err))
		close(end)
		return 0, 0, end, false
	}
	firstLine := make(chan time.Duration, 1)
	d.drains.Go(func() {
		// Closed last, once the stream's outcome is counted.
		defer close(end)
		defer resp.Body.Close()
		terminal, seen := "", false
		err := readLines(resp.Body, func(line []byte, at time.Time) bool {
			if !seen {
				seen = true
				firstLine <- at.Sub(sent)
			}
			if ev := lineEvent(line); ev != lineStep && ev != lineKeepalive {
				terminal = ev
			}
			return true
		})
		if !seen {
			close(firstLine)
		}
		switch {
		case err != nil:
			d.res.fail(fmt.Errorf("run %d: stream broke: %w", run.id, err))
		case terminal != "done":
			d.res.fail(fmt.Errorf("run %d: stream ended with %q, not done", run.id, terminal))
		default:
			d.completed.Add(1)
		}
	})
	first, ok = <-firstLine
	return head, first, end, ok
}

// steadyTimes are the steady part's measurements, one per decision.
type steadyTimes struct {
	firsts, headers []time.Duration // of the decisions that got a first line
	inFlight        []int           // streams open when each was posted, its own included
}

// steady decides every run from o.steadyN clients, each of which posts
// its next decision as soon as its last stream ended, so that o.steadyN
// are in flight at all times. A stream lasts about one hold: client i
// starts i/n of a hold after the first, so that the decisions arrive
// spread over it as in a steady state, not as bursts.
func (d *firstLineDecider) steady(ctx context.Context, runs []waitingRun) steadyTimes {
	n, hold := d.l.o.steadyN, d.l.o.firstLineHold
	var (
		mu         sync.Mutex
		out        steadyTimes
		next, open atomic.Int64
		wg         sync.WaitGroup
	)
	stopProgress := progress(d.l.stderr, 5*time.Second, func() string {
		return fmt.Sprintf("first-line: %d of %d steady decisions posted, %d in flight",
			min(int(next.Load()), len(runs)), len(runs), open.Load())
	})
	defer stopProgress()
	for i := range n {
		wg.Go(func() {
			select {
			case <-time.After(hold * time.Duration(i) / time.Duration(n)):
			case <-ctx.Done():
				return
			}
			for {
				k := int(next.Add(1)) - 1
				if k >= len(runs) || ctx.Err() != nil {
					return
				}
				posted := int(open.Add(1))
				head, first, ended, ok := d.one(ctx, runs[k])
				mu.Lock()
				out.inFlight = append(out.inFlight, posted)
				if ok {
					out.headers = append(out.headers, head)
					out.firsts = append(out.firsts, first)
				}
				mu.Unlock()
				<-ended
				open.Add(-1)
			}
		})
	}
	wg.Wait()
	return out
}

// warmUp opens n connections to the server at once and leaves them idle
// in the client's pool.
func (l *loadtest) warmUp(ctx context.Context, n int) error {
	gate := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-gate
			code, err := l.c.get(ctx, "/healthz")
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("GET /healthz: %d", code)
			}
			errs <- err
		})
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
