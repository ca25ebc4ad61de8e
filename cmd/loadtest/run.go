package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// loadtest is one invocation: its options, its client, where its runs
// come from, and the server process it watches.
type loadtest struct {
	o      *options
	c      *client
	prep   preparer
	db     *database // nil without --dsn
	pid    int       // the server's; 0 when unknown
	dbPID  int       // the database server's, when it runs here; 0 when unknown
	stderr io.Writer
}

// run is main without the process: it parses the flags, prepares, runs
// the phases and prints the report's Markdown table to stdout; progress
// goes to stderr. A phase that fails is a row of the table, not an error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	if o.printConfig != "" {
		_, text := o.configYAML(o.printConfig)
		_, err := io.WriteString(stdout, text)
		return err
	}
	l := &loadtest{o: o, stderr: stderr}
	rep := &report{date: time.Now(), command: commandLine(args), keepalive: o.keepalive, url: o.url.String(),
		cpus: runtime.NumCPU(), memory: memTotal(), phases: o.phases}

	followers, streams, burst, stepsRuns, followups := 0, 0, 0, 0, 0
	if slices.Contains(o.phases, phaseFeed) {
		followers += o.feedClients
	}
	if slices.Contains(o.phases, phaseFollowups) {
		followups = o.followupsInFlight
	}
	if slices.Contains(o.phases, phaseFollowers) {
		followers = o.followers
	}
	if slices.Contains(o.phases, phaseSteps) {
		stepsRuns = o.stepsRuns
	}
	if slices.Contains(o.phases, phaseStreams) {
		streams = o.streams
	}
	if slices.Contains(o.phases, phaseBurst) {
		burst = o.burstN
	}
	need := uint64(streams + o.firstLineN + o.steadyN + burst + o.durableConcurrency + o.signinN + followers + stepsRuns + followups + 1024)
	if got, err := raiseFileLimit(need); err != nil || got < need {
		rep.note(fmt.Sprintf("this command's open-file limit is %d, below the %d it needs (%v)", got, need, err))
	}

	token := o.token
	if o.dsn != "" {
		db, t, err := openDatabase(ctx, o, getenv)
		if err != nil {
			return err
		}
		defer func() {
			if err := db.close(ctx); err != nil {
				l.logf("revoke the load token: %v", err)
			}
		}()
		l.db, l.prep, token = db, db, t
	}
	l.c = newClient(o.url, token, o.streams+o.firstLineN+o.steadyN+burst+o.durableConcurrency+followers+stepsRuns+followups)
	defer l.c.close()
	if l.prep == nil {
		l.prep = apiPreparer{c: l.c, concurrency: o.setupConcurrency}
	}
	if code, err := l.c.get(ctx, "/readyz"); err != nil || code != http.StatusOK {
		return fmt.Errorf("the server at %s is not ready (GET /readyz: %d, %v)", o.url, code, err)
	}
	l.findServer(rep)
	l.findDatabase(rep)
	rep.loads = append(rep.loads, loadAverage())

	for _, phase := range o.phases {
		if ctx.Err() != nil {
			break
		}
		switch phase {
		case phaseStreams:
			rep.streams = l.streamsPhase(ctx)
			if lim := rep.streams.serverFDs; lim > 0 && lim < int64(o.streams)+100 {
				rep.note(fmt.Sprintf("the server's open-file limit is %d, below the %d streams: start it under ulimit -n 65536", lim, o.streams))
			}
			if g := rep.streams.medianGap; g > 0 && (g < o.keepalive/2 || g > o.keepalive*3/2) {
				rep.note(fmt.Sprintf("keepalives came every %s, not every --keepalive %s: give the server's --keepalive", g.Round(time.Millisecond), o.keepalive))
			}
		case phaseFirstLine:
			rep.firstLine = l.firstLinePhase(ctx)
		case phaseBurst:
			rep.burst = l.burstPhase(ctx)
		case phaseDurable:
			rep.durable = l.durablePhase(ctx)
		case phaseFollowers:
			rep.followers = l.followersPhase(ctx)
		case phaseSteps:
			rep.steps = l.stepsPhase(ctx)
		case phaseBulkFlood:
			rep.bulkFlood = l.bulkFloodPhase(ctx)
		case phaseFollowups:
			rep.followups = l.followupsPhase(ctx)
		case phaseFeed:
			rep.feed = l.feedPhase(ctx)
		case phaseSignin:
			rep.signin = l.signinPhase(ctx)
			if n := rep.signin.answers[http.StatusTooManyRequests]; n > 0 && o.signinTarget == signinFlood {
				rep.note(fmt.Sprintf("%d sign-ins were throttled (429) although each had a name and an X-Forwarded-For address of its own:"+
					" start the server with --trusted-proxies 127.0.0.1, without which they all come from this command's address", n))
			}
		}
		rep.loads = append(rep.loads, loadAverage())
	}
	rep.write(stdout)
	return ctx.Err()
}

// findServer finds the server's process for its RSS: --pid, or the
// process that listens on the URL's port on this machine.
func (l *loadtest) findServer(rep *report) {
	switch {
	case l.o.pid > 0:
		l.pid = l.o.pid
	case l.o.loopback():
		pid, err := listenerPID(l.o.serverPort())
		if err != nil {
			rep.note(fmt.Sprintf("server RSS not measured: %v", err))
			return
		}
		l.pid = pid
	default:
		rep.note("server RSS not measured: the server is not on this machine (or give --pid)")
		return
	}
	if _, err := rssBytes(l.pid); err != nil {
		rep.note(fmt.Sprintf("server RSS not measured: process %d: %v", l.pid, err))
		l.pid = 0
		return
	}
	rep.pid = l.pid
	l.logf("server process %d", l.pid)
}

// findDatabase finds the MySQL server's process, for the CPU time it
// spends on the load: the process that listens on the DSN's TCP port.
func (l *loadtest) findDatabase(rep *report) {
	if l.o.dsn == "" {
		return
	}
	cfg, err := mysql.ParseDSN(l.o.dsn)
	if err != nil || cfg.Net != "tcp" {
		return
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	ip := net.ParseIP(host)
	if err != nil || !(host == "localhost" || (ip != nil && ip.IsLoopback())) {
		return
	}
	p, _ := strconv.Atoi(port)
	if pid, err := listenerPID(p); err == nil {
		l.dbPID, rep.dbPID = pid, pid
	}
}

// cpuSample is the CPU time the server and the database had used at one
// moment; -1 where unknown.
type cpuSample struct{ server, db time.Duration }

// unknownCPU is a phase's CPU use before it is measured.
var unknownCPU = cpuSample{server: -1, db: -1}

func (l *loadtest) cpu() cpuSample {
	c := cpuSample{server: -1, db: -1}
	if l.pid != 0 {
		if d, err := cpuTime(l.pid); err == nil {
			c.server = d
		}
	}
	if l.dbPID != 0 {
		if d, err := cpuTime(l.dbPID); err == nil {
			c.db = d
		}
	}
	return c
}

// since is the CPU time used from an earlier sample to now.
func (l *loadtest) since(start cpuSample) cpuSample {
	now := l.cpu()
	used := cpuSample{server: -1, db: -1}
	if now.server >= 0 && start.server >= 0 {
		used.server = now.server - start.server
	}
	if now.db >= 0 && start.db >= 0 {
		used.db = now.db - start.db
	}
	return used
}

// rss is the server's RSS now; -1 when unknown.
func (l *loadtest) rss() (int64, error) {
	if l.pid == 0 {
		return -1, nil
	}
	n, err := rssBytes(l.pid)
	if err != nil {
		return -1, err
	}
	return n, nil
}

// sampleRSS samples the server's RSS at every interval until the returned
// function is called, which returns the highest sample, and the highest
// taken while allOpen held (-1 for none).
func (l *loadtest) sampleRSS(every time.Duration, allOpen func() bool) (stop func() (peak, peakAllOpen int64)) {
	peak, peakAll := int64(-1), int64(-1)
	if l.pid == 0 {
		return func() (int64, int64) { return -1, -1 }
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if n, err := l.rss(); err == nil {
				peak = max(peak, n)
				if allOpen() {
					peakAll = max(peakAll, n)
				}
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() (int64, int64) {
		close(done)
		wg.Wait()
		return peak, peakAll
	}
}

func (l *loadtest) logf(format string, args ...any) {
	fmt.Fprintf(l.stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}
