package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// durableResult is what the durable phase measured.
type durableResult struct {
	n, concurrency int
	recorded       int // answered 202: recorded for a worker
	failures       int
	firstErr       string
	elapsed        time.Duration // first POST to last answer
	latency        summary
	verified       int // decisions the database holds as durable; -1 unchecked
	setupTime      time.Duration
	cpu            cpuSample // used while the decisions were posted
}

func (r *durableResult) fail(err error) {
	failMu.Lock()
	defer failMu.Unlock()
	r.failures++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

// rate is durable decisions recorded per second.
func (r *durableResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.recorded) / r.elapsed.Seconds()
}

// errNotDurable: the server carried a decision out inside the request.
var errNotDurable = errors.New("the server ran the decision inside the request (200) instead of recording it for a worker (202): " +
	"start it with --decision-path durable --workers 0 for this phase")

// durablePhase posts o.durableN plain (not streamed) decisions from
// o.durableConcurrency clients as fast as they are answered; the server
// must record each for a worker and answer 202.
func (l *loadtest) durablePhase(ctx context.Context) *durableResult {
	o := l.o
	res := &durableResult{n: o.durableN, concurrency: o.durableConcurrency, verified: -1, cpu: unknownCPU}
	setupStart := time.Now()
	l.logf("durable: preparing %d waiting runs of %s", o.durableN+1, o.configID(configQuick))
	runs, err := l.prep.waitingRuns(ctx, o.configID(configQuick), o.durableN+1)
	res.setupTime = time.Since(setupStart)
	if err != nil {
		res.fail(err)
		return res
	}
	// One probe first: on a server that runs decisions in the request this
	// phase would only measure continuations.
	probe, runs := runs[0], runs[1:]
	if code, err := l.decideOnce(ctx, probe); err != nil {
		res.fail(err)
		return res
	} else if code != http.StatusAccepted {
		res.fail(errNotDurable)
		return res
	}
	if err := l.warmUp(ctx, o.durableConcurrency); err != nil {
		res.fail(err)
		return res
	}
	var (
		mu        sync.Mutex
		latencies = make([]time.Duration, 0, len(runs))
		recorded  atomic.Int64
	)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	stop := progress(l.stderr, 5*time.Second, func() string {
		return fmt.Sprintf("durable: %d of %d recorded", recorded.Load(), len(runs))
	})
	cpuStart := l.cpu()
	start := time.Now()
	err = parallel(ctx, len(runs), o.durableConcurrency, func(ctx context.Context, i int) error {
		sent := time.Now()
		code, err := l.decideOnce(ctx, runs[i])
		took := time.Since(sent)
		switch {
		case err != nil:
			res.fail(err)
		case code == http.StatusOK:
			return errNotDurable
		case code != http.StatusAccepted:
			res.fail(fmt.Errorf("run %d: answered %d", runs[i].id, code))
		default:
			recorded.Add(1)
			mu.Lock()
			latencies = append(latencies, took)
			mu.Unlock()
		}
		return nil
	})
	res.elapsed, res.cpu = time.Since(start), l.since(cpuStart)
	stop()
	if err != nil {
		res.fail(err)
	}
	res.recorded, res.latency = int(recorded.Load()), summarize(latencies)
	if l.db != nil {
		if n, err := l.db.durableDecisions(context.WithoutCancel(ctx), runs); err == nil {
			res.verified = n
		} else {
			l.logf("durable: could not count the recorded decisions: %v", err)
		}
	}
	return res
}

// decideOnce posts a plain decision and returns the answer's status; a
// refusal (4xx, 5xx) is an error with the server's reason.
func (l *loadtest) decideOnce(ctx context.Context, r waitingRun) (int, error) {
	resp, err := l.c.decide(ctx, r, false)
	if err != nil {
		return 0, fmt.Errorf("run %d: %w", r.id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("run %d: %s", r.id, answerError(resp))
	}
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}
