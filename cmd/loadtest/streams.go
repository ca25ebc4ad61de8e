package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// streamsResult is what the streams phase measured.
type streamsResult struct {
	n         int
	opened    int // answered 200 and sent a first line
	completed int // ended with "done"
	failures  int
	firstErr  string
	peakOpen  int
	// Server RSS in bytes (-1: unknown): before the first decision, the
	// highest sample of the phase, and the highest while all n were open.
	rssBefore, rssPeak, rssAllOpen int64
	serverFDs                      int64 // the server's open-file limit; 0 unknown, -1 unlimited
	lateness                       summary
	// latenessHeld is the lateness of the keepalives that arrived while
	// every stream was open and none had ended: the hold, without the
	// ramp up and the settling at the end.
	latenessHeld         summary
	medianGap            time.Duration // median time between a keepalive and the line before it
	openTime             time.Duration // first POST to the last stream's first line
	setupTime, phaseTime time.Duration
	cpu                  cpuSample // used from the first POST to the last stream's end
}

// perStream is the memory one open continuation costs the server.
func (r *streamsResult) perStream() int64 {
	if r.rssBefore < 0 || r.rssPeak < 0 || r.n == 0 {
		return -1
	}
	return (r.rssPeak - r.rssBefore) / int64(r.n)
}

// streamsPhase opens o.streams streamed decisions on runs of the hold
// configuration, keeps them open while their continuations work silently,
// and times every keepalive line against the one before it.
func (l *loadtest) streamsPhase(ctx context.Context) *streamsResult {
	o := l.o
	res := &streamsResult{n: o.streams, rssBefore: -1, rssPeak: -1, rssAllOpen: -1, cpu: unknownCPU}
	setupStart := time.Now()
	l.logf("streams: preparing %d waiting runs of %s", o.streams, o.configID(configHold))
	runs, err := l.prep.waitingRuns(ctx, o.configID(configHold), o.streams)
	res.setupTime = time.Since(setupStart)
	if err != nil {
		res.fail(err)
		return res
	}
	l.logf("streams: %d runs wait (%s)", len(runs), res.setupTime.Round(time.Millisecond))
	if l.pid > 0 {
		res.serverFDs, _ = openFileLimit(l.pid)
		// Let the server settle after setup so "before" is its idle size.
		time.Sleep(time.Second)
		res.rssBefore, _ = l.rss()
	}

	ctx, cancel := context.WithTimeout(ctx, o.hold+10*time.Minute)
	defer cancel()
	var (
		open, peak atomic.Int64
		allOpenAt  atomic.Int64 // unix nanos when the last stream opened
		firstEnd   atomic.Int64 // unix nanos when the first stream ended
		mu         sync.Mutex
		lateness   []keepaliveSample
		gaps       []time.Duration
		opened     atomic.Int64
		completed  atomic.Int64
	)
	sampler := l.sampleRSS(o.sampleEvery, func() bool { return open.Load() == int64(o.streams) })
	stopProgress := progress(l.stderr, 5*time.Second, func() string {
		rss, _ := l.rss()
		return fmt.Sprintf("streams: %d open (peak %d), %d done, %d failed, server RSS %s",
			open.Load(), peak.Load(), completed.Load(), res.failureCount(), fmtBytes(rss))
	})
	slots := make(chan struct{}, o.openConcurrency)
	cpuStart := l.cpu()
	start := time.Now()
	var wg sync.WaitGroup
	for _, run := range runs {
		wg.Go(func() {
			slots <- struct{}{}
			var once sync.Once
			release := func() { once.Do(func() { <-slots }) }
			defer release()
			resp, err := l.c.decide(ctx, run, true)
			if err != nil {
				res.fail(fmt.Errorf("run %d: %w", run.id, err))
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				res.fail(fmt.Errorf("run %d: %s", run.id, answerError(resp)))
				return
			}
			// A keepalive may come before any step (a slow first step):
			// its gap counts from the response's headers.
			var (
				last      = time.Now()
				mine      []keepaliveSample
				myGaps    []time.Duration
				terminal  string
				wasOpened bool
			)
			err = readLines(resp.Body, func(line []byte, at time.Time) bool {
				if !wasOpened {
					wasOpened = true
					release()
					opened.Add(1)
					now := open.Add(1)
					for p := peak.Load(); now > p && !peak.CompareAndSwap(p, now); p = peak.Load() {
					}
					if now == int64(o.streams) {
						allOpenAt.Store(at.UnixNano())
					}
				}
				switch ev := lineEvent(line); ev {
				case lineKeepalive:
					gap := at.Sub(last)
					myGaps = append(myGaps, gap)
					mine = append(mine, keepaliveSample{at: at.UnixNano(), late: gap - o.keepalive})
				case lineStep:
				default:
					terminal = ev
					firstEnd.CompareAndSwap(0, at.UnixNano())
				}
				last = at
				return true
			})
			if wasOpened {
				open.Add(-1)
			}
			mu.Lock()
			lateness = append(lateness, mine...)
			gaps = append(gaps, myGaps...)
			mu.Unlock()
			switch {
			case err != nil:
				res.fail(fmt.Errorf("run %d: stream broke: %w", run.id, err))
			case terminal != "done":
				res.fail(fmt.Errorf("run %d: stream ended with %q, not done", run.id, terminal))
			default:
				completed.Add(1)
			}
		})
	}
	wg.Wait()
	stopProgress()
	peakRSS, allOpenRSS := sampler()
	res.phaseTime, res.cpu = time.Since(start), l.since(cpuStart)
	res.opened, res.completed, res.peakOpen = int(opened.Load()), int(completed.Load()), int(peak.Load())
	res.rssPeak, res.rssAllOpen = peakRSS, allOpenRSS
	if at := allOpenAt.Load(); at != 0 {
		res.openTime = time.Unix(0, at).Sub(start)
	}
	res.lateness, res.latenessHeld = splitLateness(lateness, allOpenAt.Load(), firstEnd.Load())
	res.medianGap = summarize(gaps).p50
	return res
}

// keepaliveSample is one keepalive's lateness and when it arrived.
type keepaliveSample struct {
	at   int64 // unix nanos
	late time.Duration
}

// splitLateness summarizes every keepalive's lateness, and that of the
// ones that arrived in [from, to): while every stream was held. The second
// summary is empty when the streams were never all open at once.
func splitLateness(samples []keepaliveSample, from, to int64) (all, held summary) {
	lates := make([]time.Duration, 0, len(samples))
	var inHold []time.Duration
	for _, s := range samples {
		lates = append(lates, s.late)
		if from != 0 && s.at >= from && (to == 0 || s.at < to) {
			inHold = append(inHold, s.late)
		}
	}
	return summarize(lates), summarize(inHold)
}

// failureCount is how many streams failed so far.
func (r *streamsResult) failureCount() int {
	failMu.Lock()
	defer failMu.Unlock()
	return r.failures
}

// failMu guards every result's failure count and first error.
var failMu sync.Mutex

func (r *streamsResult) fail(err error) {
	failMu.Lock()
	defer failMu.Unlock()
	r.failures++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}
