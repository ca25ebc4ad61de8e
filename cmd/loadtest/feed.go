package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// The feed phase: --feed-clients clients follow GET /api/feed while this
// command's engine (with --dsn) makes --feed-changes run changes, four a
// run (started, waiting, decided, settled). The server is another process
// than the one that commits the changes, so its one poller reads every
// change from the change log: what it costs the database is the poller's
// statements, which the server counts (turnstile_feed_queries_total).

// targetFeedQueries bounds the statements one server process's feed may
// send per second, whatever its clients; targetFeedP99 bounds the time
// from a change's commit to its arrival at a client.
const (
	targetFeedQueries = 10.0
	targetFeedP99     = 500 * time.Millisecond
)

// feedResult is what the feed phase measured.
type feedResult struct {
	clients, asked int
	made           int // run changes made
	attached       int
	failures       int
	firstErr       string
	openTime       time.Duration
	window         time.Duration // from the first change to the last line's arrival
	latency        summary
	rate           int     // changes a second asked for (0: as fast as they go)
	delivered      int64   // run lines of the made changes that arrived, all clients
	early          int64   // of those, lines that arrived before the step's call returned (counted at 0 ms)
	queries        float64 // the server's feed statements per second over the window; -1 unknown
	rssBefore      int64
	rssOpen        int64
	cpu            cpuSample
	self           time.Duration // this command's CPU time over the window: the clients and the steps
}

func (r *feedResult) fail(err error) {
	r.failures++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

// feedStamp is when this command's step of a change was called and when
// it returned: the change committed in between.
type feedStamp struct{ before, after atomic.Int64 }

type feedKey struct {
	run    int64
	change string
}

// feedPhase runs the phase; it needs the server's database.
func (l *loadtest) feedPhase(ctx context.Context) *feedResult {
	o := l.o
	res := &feedResult{clients: o.feedClients, asked: o.feedChanges, rate: o.feedRate, queries: -1, rssBefore: -1, rssOpen: -1, cpu: unknownCPU}
	if l.db == nil {
		res.fail(errors.New("the feed phase needs --dsn: it makes the run changes itself"))
		return res
	}
	// The phase's runs are those above the highest before it.
	var lastRun int64
	if err := l.db.store.DB().QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM runs`).Scan(&lastRun); err != nil {
		res.fail(err)
		return res
	}
	res.rssBefore, _ = l.rss()
	var (
		stamps   sync.Map // feedKey → *feedStamp
		lat      = make([]atomic.Int64, 10001)
		got      atomic.Int64
		early    atomic.Int64
		attached atomic.Int64
		mu       sync.Mutex
		wg       sync.WaitGroup
		sem      = make(chan struct{}, o.openConcurrency)
	)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	openStart := time.Now()
	for range o.feedClients {
		sem <- struct{}{}
		wg.Go(func() {
			err := l.c.followFeed(fctx, func() { attached.Add(1); <-sem }, func(k feedKey, at time.Time) {
				if k.run <= lastRun {
					return // a change of before the phase
				}
				got.Add(1)
				v, ok := stamps.Load(k)
				if !ok {
					// A run's start is stamped once Start returns with its
					// id: this line came first.
					early.Add(1)
					lat[0].Add(1)
					return
				}
				s := v.(*feedStamp)
				from := s.after.Load()
				if from == 0 {
					from = s.before.Load()
				}
				ms := max(0, min(int64(len(lat)-1), at.Sub(time.Unix(0, from)).Milliseconds()))
				lat[ms].Add(1)
			})
			if err != nil && fctx.Err() == nil {
				mu.Lock()
				res.fail(err)
				mu.Unlock()
			}
		})
	}
	for attached.Load() < int64(o.feedClients) && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	res.openTime = time.Since(openStart)
	res.attached = int(attached.Load())
	time.Sleep(2 * time.Second) // the clients idle: what they hold, not what opening them took
	res.rssOpen, _ = l.rss()
	l.logf("feed: %d clients attached in %s; making %d run changes", res.attached, res.openTime.Round(time.Millisecond), o.feedChanges)

	q0, qerr := l.c.feedQueries(ctx)
	start := time.Now()
	base := l.cpu()
	selfBase, _ := cpuTime(os.Getpid())
	runs := (o.feedChanges + 3) / 4
	var made atomic.Int64
	step := func(run int64, change string, f func() error) error {
		s := &feedStamp{}
		s.before.Store(time.Now().UnixNano())
		if run != 0 {
			stamps.Store(feedKey{run, change}, s)
		}
		err := f()
		s.after.Store(time.Now().UnixNano())
		if err == nil {
			made.Add(1)
		}
		return err
	}
	d := l.db
	// Paced: a run starts every 4/rate seconds, and makes its four changes
	// in the next few milliseconds.
	var every time.Duration
	if o.feedRate > 0 {
		every = 4 * time.Second / time.Duration(o.feedRate)
	}
	err := parallel(ctx, runs, d.concurrency, func(ctx context.Context, i int) error {
		if wait := time.Until(start.Add(time.Duration(i) * every)); wait > 0 {
			time.Sleep(wait)
		}
		var c *runtime.Continuation
		s := &feedStamp{}
		s.before.Store(time.Now().UnixNano())
		c, err := d.engine.Start(ctx, runtime.StartRequest{Configuration: o.configID(configQuick),
			Prompt: fmt.Sprintf("load test feed run %d", i+1), Owner: d.owner})
		if err != nil {
			return fmt.Errorf("start a run: %w", err)
		}
		s.after.Store(time.Now().UnixNano())
		stamps.Store(feedKey{c.RunID(), string(runtime.ChangeStarted)}, s)
		made.Add(1)
		var out runtime.Outcome
		if err := step(c.RunID(), string(runtime.ChangeWaiting), func() error { out = c.Run(ctx, nil); return out.Err }); err != nil {
			return err
		}
		if err := step(c.RunID(), string(runtime.ChangeDecided), func() error {
			c, err = d.engine.Decide(ctx, runtime.DecideRequest{RunID: out.RunID, Digest: out.Digest, Decision: runtime.DecisionApprove,
				Scope: runtime.ScopeOnce, Actor: d.owner, Path: runtime.PathRequest})
			return err
		}); err != nil {
			return fmt.Errorf("approve run %d: %w", out.RunID, err)
		}
		return step(c.RunID(), string(runtime.ChangeSettled), func() error { return c.Run(ctx, nil).Err })
	})
	d.release()
	if err != nil {
		res.fail(err)
	}
	res.made = int(made.Load())
	// Every client is owed every change: wait for the last lines (at most
	// a few polls), then count.
	want := int64(res.made) * int64(res.attached)
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() < want && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	res.window = time.Since(start)
	res.cpu = l.since(base)
	if now, err := cpuTime(os.Getpid()); err == nil {
		res.self = now - selfBase
	}
	if q1, err := l.c.feedQueries(ctx); err == nil && qerr == nil {
		res.queries = (q1 - q0) / res.window.Seconds()
	} else {
		res.fail(fmt.Errorf("read turnstile_feed_queries_total: %w", errors.Join(qerr, err)))
	}
	stop()
	wg.Wait()
	res.delivered, res.early = got.Load(), early.Load()
	var ds []time.Duration
	for ms := range lat {
		for range lat[ms].Load() {
			ds = append(ds, time.Duration(ms)*time.Millisecond)
		}
	}
	res.latency = summarize(ds)
	return res
}

// followFeed follows GET /api/feed until ctx ends: attached is called at
// the first line, change for every run line.
func (c *client) followFeed(ctx context.Context, attached func(), change func(feedKey, time.Time)) error {
	body, err := c.openStream(ctx, "/api/feed")
	if err != nil {
		attached()
		return err
	}
	defer body.Close()
	seen := false
	var lineErr error
	err = readLines(body, func(line []byte, at time.Time) bool {
		// Millions of run lines: read the two fields by hand, so that
		// this command's decoding takes the shared cores from the server
		// as little as it can.
		if k, ok := runLineKey(line); ok {
			change(k, at)
			return true
		}
		var v struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(line, &v) != nil {
			return true
		}
		switch v.Type {
		case "attached":
			seen = true
			attached()
		case "error":
			lineErr = fmt.Errorf("the feed ended early: %s", line)
			return false
		}
		return true
	})
	if !seen {
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

// runLineKey reads run_id and change of a feed's run line, as the server
// writes it; false for any other line.
func runLineKey(line []byte) (feedKey, bool) {
	if !bytes.HasPrefix(line, []byte(`{"type":"run",`)) {
		return feedKey{}, false
	}
	_, rest, ok := bytes.Cut(line, []byte(`"run_id":`))
	if !ok {
		return feedKey{}, false
	}
	end := bytes.IndexByte(rest, ',')
	id, err := strconv.ParseInt(string(rest[:max(end, 0)]), 10, 64)
	_, rest, ok2 := bytes.Cut(rest, []byte(`"change":"`))
	q := bytes.IndexByte(rest, '"')
	if err != nil || !ok2 || q < 0 {
		return feedKey{}, false
	}
	return feedKey{id, string(rest[:q])}, true
}

// feedQueries reads turnstile_feed_queries_total from the server's
// /metrics.
func (c *client) feedQueries(ctx context.Context) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %d (the server serves it when it runs agents)", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "turnstile_feed_queries_total "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, errors.New("no turnstile_feed_queries_total on /metrics")
}

// rows are the phase's lines of the table.
func (r *feedResult) rows() []row {
	label := fmt.Sprintf("feed: delivery p50 / p99 (max), %s clients, %s run changes", fmtInt(r.clients), fmtInt(r.made))
	var rows []row
	want := int64(r.made) * int64(r.attached)
	if r.latency.n == 0 {
		rows = append(rows, row{label, "no line arrived: " + r.firstErr, "p99 ≤ 500 ms", verdict(false)})
	} else {
		rows = append(rows, row{label, fmt.Sprintf("%s / %s (%s), %s of %s lines", fmtDur(r.latency.p50), fmtDur(r.latency.p99),
			fmtDur(r.latency.max), fmtInt(int(r.delivered)), fmtInt(int(want))),
			"p99 ≤ 500 ms, none lost", verdict(r.latency.p99 <= targetFeedP99 && r.delivered >= want && r.failures == 0)})
	}
	q := "not measured"
	if r.queries >= 0 {
		q = fmt.Sprintf("%.1f/s (turnstile_feed_queries_total over %s)", r.queries, fmtDur(r.window))
	}
	rows = append(rows, row{"feed: the server's feed statements per second", q, "≤ 10/s", verdict(r.queries >= 0 && r.queries <= targetFeedQueries)})
	if r.rssBefore >= 0 && r.rssOpen >= 0 && r.attached > 0 {
		rows = append(rows, row{"feed: memory per open feed client",
			fmt.Sprintf("%s ((RSS with all open %s − before %s) / N)", fmtBytes((r.rssOpen-r.rssBefore)/int64(r.attached)),
				fmtBytes(r.rssOpen), fmtBytes(r.rssBefore)), "—", "—"})
	}
	return rows
}

// line is the phase's line under the table.
func (r *feedResult) line() string {
	pace := "as fast as they go"
	if r.rate > 0 {
		pace = fmt.Sprintf("paced at %s/s", fmtInt(r.rate))
	}
	return fmt.Sprintf("- feed: %s of %s clients attached in %s; %s run changes (%s runs, %s) made by this command's engine in %s"+
		" (the window, with the last lines' arrival); %s lines arrived before the step's call returned (counted at 0 ms);"+
		" this command (the clients and the steps) %s of CPU in the window%s\n",
		fmtInt(r.attached), fmtInt(r.clients), fmtDur(r.openTime), fmtInt(r.made), fmtInt((r.made+3)/4), pace, fmtDur(r.window),
		fmtInt(int(r.early)), fmtDur(r.self), cpuNote(r.cpu, r.made, "change")+failureNote(r.failures, r.firstErr))
}
