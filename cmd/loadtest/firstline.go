package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// firstLineResult is what the first-line phase measured.
type firstLineResult struct {
	n, rounds, serialN   int
	firstLine, headers   summary
	serial               summary // one decision at a time: the floor under no contention
	completed            int
	failures             int
	firstErr             string
	setupTime, phaseTime time.Duration
	cpu                  cpuSample // used by the decisions and their continuations
}

func (r *firstLineResult) fail(err error) {
	failMu.Lock()
	defer failMu.Unlock()
	r.failures++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

// firstLinePhase posts o.firstLineSerial streamed decisions one at a
// time, then o.firstLineN at the same moment, o.firstLineRounds times, and
// times each from sending its POST to its response headers and to its
// first line. The continuations work silently for --first-line-hold after
// that line, so a decision's time is not shared with the steps of those
// before it; each round starts when the previous one's streams ended.
func (l *loadtest) firstLinePhase(ctx context.Context) *firstLineResult {
	o := l.o
	res := &firstLineResult{n: o.firstLineN, rounds: o.firstLineRounds, serialN: o.firstLineSerial, cpu: unknownCPU}
	total := o.firstLineSerial + o.firstLineN*o.firstLineRounds
	setupStart := time.Now()
	l.logf("first-line: preparing %d waiting runs of %s", total, o.configID(configFirstLine))
	runs, err := l.prep.waitingRuns(ctx, o.configID(configFirstLine), total)
	res.setupTime = time.Since(setupStart)
	if err != nil {
		res.fail(err)
		return res
	}
	// A client that decides often keeps its connections: open them first,
	// so the rounds time the server rather than TCP handshakes.
	if err := l.warmUp(ctx, o.firstLineN); err != nil {
		res.fail(err)
		return res
	}
	var (
		mu                      sync.Mutex
		firsts, headers, serial []time.Duration
		completedStreams        int
	)
	// one decides one run and returns at its first line; the rest of the
	// stream is read to its end in the background, under drains.
	var drains sync.WaitGroup
	one := func(ctx context.Context, run waitingRun, gate <-chan struct{}) (head, first time.Duration, ok bool) {
		<-gate
		sent := time.Now()
		resp, err := l.c.decide(ctx, run, true)
		if err != nil {
			res.fail(fmt.Errorf("run %d: %w", run.id, err))
			return 0, 0, false
		}
		head = time.Since(sent)
		if resp.StatusCode != http.StatusOK {
			res.fail(fmt.Errorf("run %d: %s", run.id, answerError(resp)))
			resp.Body.Close()
			return 0, 0, false
		}
		firstLine := make(chan time.Duration, 1)
		drains.Go(func() {
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
				res.fail(fmt.Errorf("run %d: stream broke: %w", run.id, err))
			case terminal != "done":
				res.fail(fmt.Errorf("run %d: stream ended with %q, not done", run.id, terminal))
			default:
				mu.Lock()
				completedStreams++
				mu.Unlock()
			}
		})
		first, ok = <-firstLine
		return head, first, ok
	}
	open := make(chan struct{})
	close(open)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(o.firstLineRounds+1)*o.firstLineHold)
	defer cancel()
	cpuStart := l.cpu()
	start := time.Now()
	for _, run := range runs[:o.firstLineSerial] {
		if _, first, ok := one(pctx, run, open); ok {
			serial = append(serial, first)
		}
	}
	// The bursts start with every earlier continuation ended.
	drains.Wait()
	if o.firstLineSerial > 0 {
		l.logf("first-line: %d decisions one at a time done", o.firstLineSerial)
	}
	runs = runs[o.firstLineSerial:]
	for round := range o.firstLineRounds {
		batch := runs[round*o.firstLineN : (round+1)*o.firstLineN]
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for _, run := range batch {
			wg.Go(func() {
				head, first, ok := one(pctx, run, gate)
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
		drains.Wait()
		l.logf("first-line: round %d of %d done", round+1, o.firstLineRounds)
		if round+1 < o.firstLineRounds {
			time.Sleep(500 * time.Millisecond)
		}
	}
	res.phaseTime, res.cpu = time.Since(start), l.since(cpuStart)
	res.firstLine, res.headers, res.serial = summarize(firsts), summarize(headers), summarize(serial)
	res.completed = completedStreams
	return res
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
