package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The steps phase: --steps-runs runs continue at once in the server, each
// recording steps as fast as the scripted provider and a slow_task of 0 s
// allow, and the phase measures the steps recorded per second and the CPU
// time the server and the database spend per step while all of them run.
// Each run is started by a streamed POST /api/runs, so its continuation
// runs inside that request (the server needs --max-continuations of at
// least --steps-runs) and its stream tells the client every step.

// stepsConfig is the steps phase's configuration: one round that calls
// slow_task for 0 s calls times, then a final answer: calls+3 steps (the
// two rounds, the calls, the settle), none of them waiting on anything.
func stepsConfig(calls int) (identifier, yaml string) {
	identifier = fmt.Sprintf("loadtest-steps-%d", calls)
	var b strings.Builder
	fmt.Fprintf(&b, "identifier: %s\nname: Load test (%d steps as fast as they go)\nactive: true\n", identifier, calls+3)
	b.WriteString("max_iterations: 2\nprivacy_level: metadata\nprovider:\n  type: scripted\n  script:\n    rounds:\n      - tool_calls:\n")
	for range calls {
		b.WriteString("          - name: slow_task\n            arguments: {seconds: 0, label: \"step\"}\n")
	}
	b.WriteString("      - text: \"Done.\"\ntools: [slow_task]\n")
	return identifier, b.String()
}

// stepsResult is what the steps phase measured.
type stepsResult struct {
	runs, calls int
	started     int // streams that sent their first line
	completed   int // streams that ended with "done"
	failures    int
	firstErr    string
	// The window: from a second after every run's first line to
	// --steps-window later, or to the first run's end if that comes first.
	window        time.Duration
	windowSteps   int64
	inFlightStart int // runs not yet ended when the window opened
	inFlightEnd   int // … and when it closed
	total         int64
	elapsed       time.Duration // first POST to the last stream's end
	cpu           cpuSample     // used over the window
	self          time.Duration // this command's CPU over the window
}

func (r *stepsResult) fail(err error) {
	failMu.Lock()
	defer failMu.Unlock()
	r.failures++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

// rate is the steps recorded per second in the window.
func (r *stepsResult) rate() float64 {
	if r.window <= 0 {
		return 0
	}
	return float64(r.windowSteps) / r.window.Seconds()
}

// stepsPhase runs the phase; it needs the server's database for its
// configuration.
func (l *loadtest) stepsPhase(ctx context.Context) *stepsResult {
	o := l.o
	res := &stepsResult{runs: o.stepsRuns, calls: o.stepsCalls, cpu: unknownCPU}
	if l.db == nil {
		res.fail(errors.New("the steps phase needs --dsn: it saves its configuration itself"))
		return res
	}
	id, text := stepsConfig(o.stepsCalls)
	if err := l.db.saveConfig(ctx, id, text); err != nil {
		res.fail(err)
		return res
	}
	if err := l.warmUp(ctx, min(o.stepsRuns, 256)); err != nil {
		res.fail(err)
		return res
	}
	var (
		started, ended, steps atomic.Int64
		completed, gate       atomic.Int64
		allStarted            = make(chan struct{})
		firstEnded            = make(chan struct{})
		startOnce, endOnce    sync.Once
		wg                    sync.WaitGroup
	)
	l.logf("steps: starting %d runs of %s at once", o.stepsRuns, id)
	begin := time.Now()
	for i := range o.stepsRuns {
		wg.Go(func() {
			first := false
			done, err := l.c.streamStart(ctx, id, fmt.Sprintf("load test steps run %d", i+1), func(step bool) {
				if !first {
					first = true
					started.Add(1)
					if gate.Add(1) == int64(o.stepsRuns) {
						startOnce.Do(func() { close(allStarted) })
					}
				}
				if step {
					steps.Add(1)
				}
			})
			if err != nil {
				res.fail(err)
			}
			if done {
				completed.Add(1)
			}
			if !first && gate.Add(1) == int64(o.stepsRuns) {
				// A run that failed before its first line must not hold
				// the window shut.
				startOnce.Do(func() { close(allStarted) })
			}
			ended.Add(1)
			endOnce.Do(func() { close(firstEnded) })
		})
	}
	stop := progress(l.stderr, 5*time.Second, func() string {
		return fmt.Sprintf("steps: %d of %d started, %d ended, %d steps", started.Load(), o.stepsRuns, ended.Load(), steps.Load())
	})
	select {
	case <-allStarted:
	case <-ctx.Done():
	}
	select {
	case <-time.After(time.Second):
	case <-firstEnded:
	case <-ctx.Done():
	}
	res.inFlightStart = o.stepsRuns - int(ended.Load())
	cpuStart, selfStart := l.cpu(), selfCPU()
	s0, from := steps.Load(), time.Now()
	select {
	case <-time.After(o.stepsWindow):
	case <-firstEnded:
	case <-ctx.Done():
	}
	res.windowSteps, res.window = steps.Load()-s0, time.Since(from)
	res.cpu, res.self = l.since(cpuStart), selfCPU()-selfStart
	res.inFlightEnd = o.stepsRuns - int(ended.Load())
	l.logf("steps: window of %s closed with %d runs in flight; waiting for the rest to settle", res.window.Round(time.Millisecond), res.inFlightEnd)
	wg.Wait()
	stop()
	res.elapsed, res.total = time.Since(begin), steps.Load()
	res.started, res.completed = int(started.Load()), int(completed.Load())
	return res
}

// selfCPU is this command's CPU time so far; 0 when unknown.
func selfCPU() time.Duration {
	d, err := cpuTime(os.Getpid())
	if err != nil {
		return 0
	}
	return d
}

// streamStart starts a run with a streamed POST /api/runs and reads its
// stream to the end, calling line for every line (step tells a step's).
// It reports whether the stream ended with "done": the run completed.
func (c *client) streamStart(ctx context.Context, configuration, prompt string, line func(step bool)) (bool, error) {
	body, _ := json.Marshal(map[string]any{"configuration": configuration, "prompt": prompt})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/runs", bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.http.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("POST /api/runs: %s", answerError(resp))
	}
	last := ""
	err = readLines(resp.Body, func(l []byte, _ time.Time) bool {
		// Step lines are nearly all of them: spare them the decoder.
		if bytes.HasPrefix(l, []byte(`{"type":"step"`)) {
			line(true)
			return true
		}
		last = lineEvent(l)
		line(last == lineStep)
		return true
	})
	if err != nil {
		return false, err
	}
	if last != "done" {
		return false, fmt.Errorf("POST /api/runs: the stream ended with %q, not done", last)
	}
	return true, nil
}

// rows are the phase's lines of the table.
func (r *stepsResult) rows() []row {
	label := fmt.Sprintf("steps: recorded per second, %s runs continuing at once", fmtInt(r.runs))
	if r.windowSteps == 0 {
		return []row{{label, "no step recorded: " + r.firstErr, "—", verdict(false)}}
	}
	measured := fmt.Sprintf("%s/s (%s steps in %s, %s → %s runs in flight)", fmtInt(int(r.rate())), fmtInt(int(r.windowSteps)),
		fmtDur(r.window), fmtInt(r.inFlightStart), fmtInt(r.inFlightEnd))
	rows := []row{{label, measured, "—", "—"}}
	var per []string
	for _, p := range []struct {
		who  string
		used time.Duration
	}{{"server", r.cpu.server}, {"database", r.cpu.db}} {
		if p.used >= 0 {
			per = append(per, fmt.Sprintf("%s %s", p.who, fmtDur(p.used/time.Duration(r.windowSteps))))
		}
	}
	if len(per) > 0 {
		rows = append(rows, row{"steps: CPU time per step", strings.Join(per, ", "), "—", "—"})
	}
	return rows
}

// line is the phase's line under the table.
func (r *stepsResult) line() string {
	return fmt.Sprintf("- steps: %s runs of %d steps each started at once, %s sent their first line, %s completed; %s steps in %s in all;"+
		" in the window of %s this command (the clients) used %s of CPU%s\n",
		fmtInt(r.runs), r.calls+3, fmtInt(r.started), fmtInt(r.completed), fmtInt(int(r.total)), fmtDur(r.elapsed),
		fmtDur(r.window), fmtDur(r.self), cpuNote(r.cpu, int(r.windowSteps), "step")+failureNote(r.failures, r.firstErr))
}
