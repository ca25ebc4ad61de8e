package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
)

// The followers phase: --followers clients follow --followed-runs runs
// through GET /api/runs/:id/events while the runs go on, a step about
// every second each. The continuations run in this command's own engine
// (with --dsn), another process as far as the server is concerned, so
// the server's followers are served by its one poller: the case that costs
// the database something. (A continuation in the server's own process
// hands its followers its events directly, which costs no query at all.)

// targetFollowerQueries is what the followers may add to the database's
// queries per second, per server process; targetFollowerP99 bounds the
// time from an event's commit to its arrival at a follower.
const (
	targetFollowerQueries = 10.0
	targetFollowerP99     = 500 * time.Millisecond
)

// tickerConfig is the followers phase's configuration: one round that
// calls slow_task for --follow-tick, steps times, so that a run records a
// step (a tool's result) every tick until it is cancelled at the end of
// the phase. One round of many calls rather than many rounds: a
// configuration allows 20 rounds at most.
func tickerConfig(tick time.Duration, steps int) (identifier, yaml string) {
	identifier = fmt.Sprintf("loadtest-ticker-%dms-%d", tick.Milliseconds(), steps)
	var b strings.Builder
	fmt.Fprintf(&b, "identifier: %s\nname: Load test (a step every %s)\nactive: true\n", identifier, tick)
	b.WriteString("max_iterations: 2\nprivacy_level: metadata\nprovider:\n  type: scripted\n  script:\n    rounds:\n      - tool_calls:\n")
	for range steps {
		fmt.Fprintf(&b, "          - name: slow_task\n            arguments: {seconds: %g, label: \"tick\"}\n", tick.Seconds())
	}
	b.WriteString("      - text: \"Done.\"\ntools: [slow_task]\n")
	return identifier, b.String()
}

// followersResult is what the followers phase measured.
type followersResult struct {
	n, runs   int
	attached  int
	failures  int
	firstErr  string
	window    time.Duration
	latency   summary // commit (the event's created_at) → arrival, in the window with followers
	events    int     // event lines that arrived in all
	without   statusRates
	with      statusRates
	setupTime time.Duration
	openTime  time.Duration
	cpu       cpuSample // used over the window with followers
	cpuBase   cpuSample // used over the window without
	// self is this command's CPU time over the window with followers:
	// the followers' client and the continuations, on the same cores.
	self time.Duration
}

// statusRates are the database's Questions and Com_select per second over
// a window, and the steps the phase's continuations recorded per second
// in it (counted by their observer, in this command's engine).
type statusRates struct{ questions, selects, steps float64 }

// added is what the followers added to the database's queries per
// second: the window with them against the one without, scaled by how
// many steps each saw — with 10,000 streams to serve, the machine runs the
// continuations somewhat slower, and their statements would hide the
// followers'.
func (r *followersResult) added() float64 {
	if r.without.steps <= 0 {
		return r.with.questions - r.without.questions
	}
	return r.with.questions - r.without.questions*r.with.steps/r.without.steps
}

func (r *followersResult) fail(err error) {
	r.failures++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

// followersPhase runs the phase; it needs the server's database.
func (l *loadtest) followersPhase(ctx context.Context) *followersResult {
	o := l.o
	res := &followersResult{n: o.followers, runs: o.followedRuns, window: o.followWindow, cpu: unknownCPU, cpuBase: unknownCPU}
	if l.db == nil {
		res.fail(errors.New("the followers phase needs --dsn: it runs the followed continuations itself and reads the database's counters"))
		return res
	}
	setupStart := time.Now()
	// Long enough for both windows, the followers' ramp and some margin;
	// the runs are cancelled at the end anyway.
	steps := int((2*o.followWindow+5*time.Minute)/o.followTick) + 1
	id, text := tickerConfig(o.followTick, steps)
	if err := l.db.saveConfig(ctx, id, text); err != nil {
		res.fail(err)
		return res
	}
	l.logf("followers: starting %d runs of %s", o.followedRuns, id)
	var recorded atomic.Int64
	runs, wait, err := l.db.continuing(ctx, id, o.followedRuns, &recorded)
	res.setupTime = time.Since(setupStart)
	defer func() {
		l.logf("followers: cancelling the %d runs", len(runs))
		l.db.cancelAll(context.WithoutCancel(ctx), runs)
		wait()
	}()
	if err != nil {
		res.fail(err)
		return res
	}

	time.Sleep(2 * time.Second) // let the runs' first steps pass: the windows see them steady
	l.logf("followers: %d runs continue; %s without followers", len(runs), o.followWindow)
	base := l.cpu()
	if res.without, err = l.db.rates(ctx, o.followWindow, &recorded); err != nil {
		res.fail(err)
		return res
	}
	res.cpuBase = l.since(base)

	fctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu       sync.Mutex
		samples  []latencySample
		attached atomic.Int64
		events   atomic.Int64
		wg       sync.WaitGroup
		sem      = make(chan struct{}, o.openConcurrency)
	)
	openStart := time.Now()
	for i := range o.followers {
		run := runs[i%len(runs)]
		sem <- struct{}{}
		wg.Go(func() {
			var mine []latencySample
			err := l.c.followEvents(fctx, run, func() { attached.Add(1); <-sem }, func(s latencySample) {
				events.Add(1)
				mine = append(mine, s)
			})
			mu.Lock()
			samples = append(samples, mine...)
			if err != nil && fctx.Err() == nil {
				res.fail(err)
			}
			mu.Unlock()
		})
	}
	// attached counts the streams that opened or failed to.
	for attached.Load() < int64(o.followers) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	res.openTime = time.Since(openStart)
	l.logf("followers: %d streams opened in %s; %s with followers", attached.Load(), res.openTime.Round(time.Millisecond), o.followWindow)
	time.Sleep(2 * time.Second) // past the ramp
	from := time.Now()
	base = l.cpu()
	selfBase, _ := cpuTime(os.Getpid())
	if res.with, err = l.db.rates(ctx, o.followWindow, &recorded); err != nil {
		res.fail(err)
	}
	res.cpu = l.since(base)
	if now, err := cpuTime(os.Getpid()); err == nil {
		res.self = now - selfBase
	}
	to := time.Now()
	stop()
	wg.Wait()
	res.attached = o.followers - res.failures
	var lat []time.Duration
	for _, s := range samples {
		if s.arrived.After(from) && s.arrived.Before(to) {
			lat = append(lat, s.latency)
		}
	}
	res.latency, res.events = summarize(lat), int(events.Load())
	return res
}

// latencySample is one event line: when it arrived, and how long after
// its commit.
type latencySample struct {
	arrived time.Time
	latency time.Duration
}

// followEvents follows a run's event stream until ctx ends: attached is
// called at the first line, event for every event line recorded after it.
func (c *client) followEvents(ctx context.Context, run int64, attached func(), event func(latencySample)) error {
	body, err := c.openStream(ctx, fmt.Sprintf("/api/runs/%d/events", run))
	if err != nil {
		attached()
		return err
	}
	defer body.Close()
	var since time.Time
	var lineErr error
	err = readLines(body, func(line []byte, at time.Time) bool {
		var v struct {
			Type      string `json:"type"`
			CreatedAt string `json:"created_at"`
			Status    string `json:"status"`
		}
		if json.Unmarshal(line, &v) != nil {
			return true
		}
		switch v.Type {
		case "attached":
			since = at
			attached()
		case "event":
			created, err := time.Parse(time.RFC3339Nano, v.CreatedAt)
			if err == nil && created.After(since) {
				event(latencySample{arrived: at, latency: at.Sub(created)})
			}
		case "end", "error":
			lineErr = fmt.Errorf("run %d's stream ended early: %s", run, line)
			return false
		}
		return true
	})
	if since.IsZero() {
		attached()
	}
	if ctx.Err() != nil {
		return nil
	}
	if lineErr != nil {
		return lineErr
	}
	return err
}

// saveConfig parses and saves a configuration.
func (d *database) saveConfig(ctx context.Context, id, text string) error {
	tools := builtin.Registry(builtin.Tools(d.store)...)
	cfg, err := configfile.Parse(id+".yaml", []byte(text), func(name string) bool { _, ok := tools[name]; return ok })
	if err != nil {
		return err
	}
	return d.store.SaveConfiguration(ctx, cfg)
}

// continuing starts n runs of a configuration in this command's engine
// and leaves them running, counting their steps in steps; wait returns
// once all of them ended.
func (d *database) continuing(ctx context.Context, configuration string, n int, steps *atomic.Int64) (ids []int64, wait func(), err error) {
	conts := make([]*runtime.Continuation, n)
	err = parallel(ctx, n, d.concurrency, func(ctx context.Context, i int) error {
		c, err := d.engine.Start(ctx, runtime.StartRequest{Configuration: configuration,
			Prompt: fmt.Sprintf("load test follower run %d", i+1), Owner: d.owner})
		conts[i] = c
		return err
	})
	var wg sync.WaitGroup
	for _, c := range conts {
		if c == nil {
			continue
		}
		ids = append(ids, c.RunID())
		wg.Go(func() { c.Run(context.Background(), runtime.ObserverFunc(func(runtime.Step) { steps.Add(1) })) })
	}
	return ids, wg.Wait, err
}

// cancelAll asks every run to stop at its next step.
func (d *database) cancelAll(ctx context.Context, ids []int64) {
	parallel(ctx, len(ids), d.concurrency, func(ctx context.Context, i int) error {
		d.engine.Cancel(ctx, ids[i], d.owner)
		return nil
	})
}

// rates counts the database's Questions and Com_select, and the steps
// counted in steps, over a window.
func (d *database) rates(ctx context.Context, window time.Duration, steps *atomic.Int64) (statusRates, error) {
	read := func() (r statusRates, err error) {
		rows, err := d.store.DB().QueryContext(ctx,
			`SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_select')`)
		if err != nil {
			return r, fmt.Errorf("read the database's status: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var v float64
			if err := rows.Scan(&name, &v); err != nil {
				return r, err
			}
			switch strings.ToLower(name) {
			case "questions":
				r.questions = v
			case "com_select":
				r.selects = v
			}
		}
		return r, rows.Err()
	}
	c0, err := read()
	if err != nil {
		return statusRates{}, err
	}
	s0, start := steps.Load(), time.Now()
	select {
	case <-ctx.Done():
		return statusRates{}, ctx.Err()
	case <-time.After(window):
	}
	c1, err := read()
	if err != nil {
		return statusRates{}, err
	}
	s1, secs := steps.Load(), time.Since(start).Seconds()
	// The second read counts itself: one question.
	return statusRates{questions: (c1.questions - c0.questions - 1) / secs, selects: (c1.selects - c0.selects) / secs,
		steps: float64(s1-s0) / secs}, nil
}

// rows are the phase's lines of the table.
func (r *followersResult) rows() []row {
	label := fmt.Sprintf("followers: event delivery p50 / p99 (max), %s followers of %s runs", fmtInt(r.n), fmtInt(r.runs))
	if r.latency.n == 0 {
		return []row{{label, "no event arrived: " + r.firstErr, "p99 ≤ 500 ms", verdict(false)}}
	}
	added := r.added()
	return []row{
		{label, fmt.Sprintf("%s / %s (%s), %s events", fmtDur(r.latency.p50), fmtDur(r.latency.p99), fmtDur(r.latency.max), fmtInt(r.latency.n)),
			"p99 ≤ 500 ms", verdict(r.latency.p99 <= targetFollowerP99 && r.failures == 0)},
		{"followers: database queries per second they add",
			fmt.Sprintf("%+.1f/s (Questions %.1f/s with them, %.1f/s without, scaled by the steps' rate %.0f/s against %.0f/s; SELECTs %.1f/s against %.1f/s)",
				added, r.with.questions, r.without.questions, r.with.steps, r.without.steps, r.with.selects, r.without.selects),
			"≤ 10/s", verdict(added <= targetFollowerQueries)},
	}
}

// line is the phase's line under the table.
func (r *followersResult) line() string {
	return fmt.Sprintf("- followers: %s runs started in %s, continuing in this command's engine; %s of %s followers attached in %s;"+
		" two windows of %s, without and with them; %s event lines in all%s; this command (the clients and the continuations) %s of CPU"+
		" in the window with them; in the window without them%s\n",
		fmtInt(r.runs), fmtDur(r.setupTime), fmtInt(r.attached), fmtInt(r.n), fmtDur(r.openTime), fmtDur(r.window),
		fmtInt(r.events), cpuNote(r.cpu, r.n, "follower")+failureNote(r.failures, r.firstErr), fmtDur(r.self), cpuNote(r.cpuBase, r.runs, "run"))
}
