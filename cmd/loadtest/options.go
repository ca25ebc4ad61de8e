package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// The phases, in the order they run.
const (
	phaseStreams   = "streams"
	phaseFirstLine = "first-line"
	phaseDurable   = "durable"
	phaseSignin    = "signin"
	phaseFollowers = "followers"
	phaseBurst     = "burst"
	phaseSteps     = "steps"
	phaseBulkFlood = "bulk-flood"
	phaseFollowups = "followups"
	phaseFeed      = "feed"
)

var allPhases = []string{phaseStreams, phaseFirstLine, phaseBurst, phaseDurable, phaseSignin, phaseFollowers, phaseSteps, phaseBulkFlood, phaseFollowups, phaseFeed}

// defaultPhases run without --phases: signin only when named, for it
// measures something else (the cost of an attack, not of decisions) and
// wants the server started with --trusted-proxies; followers only when
// named, for it holds the database busy with its runs for minutes; burst
// only when named, for it holds thousands of streams for --burst-hold;
// steps only when named, for it wants a server with --max-continuations of
// at least --steps-runs; followups only when named, for it prepares
// thousands of turns first.
var defaultPhases = []string{phaseStreams, phaseFirstLine, phaseDurable}

// The surfaces the burst phase decides through.
const (
	surfaceInbox = "inbox"
	surfaceAPI   = "api"
)

// maxHold is the longest hold: slow_task works for at most 120 s.
const maxHold = 120 * time.Second

// options are the command's flags, validated.
type options struct {
	url   *url.URL
	token string
	dsn   string
	user  string

	phases []string

	streams         int
	hold            time.Duration
	openConcurrency int
	keepalive       time.Duration
	pid             int
	sampleEvery     time.Duration

	firstLineN      int
	firstLineRounds int
	firstLineSerial int
	steadyN         int
	steadyDecisions int

	burstN       int
	burstHold    time.Duration
	burstSurface string

	durableN           int
	durableConcurrency int

	signinN      int
	signinRounds int
	signinTarget string

	followers    int
	followedRuns int
	followTick   time.Duration
	followWindow time.Duration

	stepsRuns   int
	stepsCalls  int
	stepsWindow time.Duration

	bulkFloodN      int
	bulkFloodRounds int

	followupsN        int
	followupsInFlight int
	followupsRounds   int
	followupTurns     int

	feedClients int
	feedChanges int
	feedRate    int

	firstLineHold    time.Duration
	setupConcurrency int
	printConfig      string
}

const usageText = `Usage: loadtest [flags]

loadtest drives a turnstile server that is already running and prints a
Markdown table of what it measured against the project's targets:

  streams     --streams runs wait for approval on a configuration whose
              continuation then works silently for --hold (slow_task); all of
              them are approved at once as streamed decisions (POST
              /api/runs/:id/decisions, Accept: application/x-ndjson) and held
              open. Measures the server's RSS before and at the peak, memory
              per open continuation, and keepalive lateness: for every
              keepalive line, (arrival - previous line's arrival) - --keepalive.
  first-line  time from sending a streamed decision's POST to its first
              NDJSON line (the approval step's); each continuation then works
              silently for --first-line-hold. First --first-line-serial
              decisions one at a time, for the floor. Then the steady part,
              the target's reading of "100 concurrent decisions": --steady-n
              clients each post a decision, read its stream to its end and
              post the next at once, until --steady-decisions were posted, so
              that --steady-n are in flight at all times; the clients start
              spread over one --first-line-hold, so the decisions arrive
              spread too. Last, --first-line-n decisions posted in the same
              instant, --first-line-rounds times: a stress figure, which
              queues them all for the server's CPU at once.
  burst       --burst-n runs wait for approval on a configuration whose
              continuation then works silently for --burst-hold; all of
              them are approved as streamed decisions in the same instant,
              each on a connection of its own opened beforehand (no
              concurrency limit): by default through the inbox, as
              --burst-n people signed in would (--burst-surface inbox,
              which needs --dsn to sign them in; its first line comes
              right after the claim), or through the API (api; its first
              line is the approval's step). Measures every stream's first
              line and every silence between two lines of one stream after
              its first (the target: none longer than --keepalive + 1 s),
              as this command sees them. Not run by default: name it,
              --phases burst.
  durable     --durable-n decisions posted as fast as --durable-concurrency
              clients can: durable decisions recorded per second. The server
              must take the durable path (serve --decision-path durable
              --workers 0), which answers 202.
  signin      what a flood of wrong passwords costs the server: --signin-n
              POST /login with unknown names, each from a fresh client
              that fetched the form (and its CSRF cookie) first, released
              in the same instant; --signin-rounds times, each round when
              the last one's answers arrived. Measures the server's RSS
              before and at the peak (sampled every 10 ms at least),
              answers by status (401; 503 or 429 with Retry-After; anything
              else fails) and answer times. Every attempt has a name and an
              X-Forwarded-For address (10.77.x.y) of its own, so that the
              per-name and per-address throttles stay out of the way; the
              address counts only when the server runs with
              --trusted-proxies 127.0.0.1; otherwise all the attempts share
              one address, which is throttled (429) once 20 of them failed.
              With --signin-target name every attempt of a round is for
              one name from one address, and with address from one address
              with a name each; each round has a name and an address of
              its own (without --trusted-proxies 127.0.0.1 the rounds share
              this command's address). The report says how many passwords
              each round got checked (401) against the server's limit, 5
              for a name and 20 for an address; the others must be 429 (or
              503) with Retry-After. Not run by default: name it, --phases
              signin. Needs neither --dsn nor --token.
  followers   --followers clients follow --followed-runs runs through GET
              /api/runs/:id/events while the runs continue (this command's
              own engine runs them, a step every --follow-tick each: another
              process, as a worker would be, so the server's poller serves
              its followers). Measures the database's queries per second
              (SHOW GLOBAL STATUS: Questions, Com_select) over
              --follow-window without followers, then with them, and the
              delivery latency of every event line in the second window: its
              arrival minus its created_at (the database's commit time).
              Not run by default: name it, --phases followers. Needs --dsn.
  feed        --feed-clients clients follow GET /api/feed (the load user's
              one feed each) while this command's own engine makes
              --feed-changes run changes, --feed-rate a second: runs of
              the quick configuration that start, pause, are approved and
              settle, four changes each (another process, so the server's
              poller reads them from the change log). Measures the statements the server's feed
              sent the database per second (turnstile_feed_queries_total
              on its /metrics), the delivery latency of every run line
              (its arrival minus the moment this command's step returned,
              so a little under the truth), the lines that did not arrive,
              and the server's RSS per open feed client. Not run by
              default: name it, --phases feed. Needs --dsn.
  steps       --steps-runs runs are started at once by streamed POST
              /api/runs, so that each continues inside its request on the
              server, recording --steps-calls+3 steps (a round, as many
              calls of slow_task for 0 s, a round, the settle) as fast as
              they go. Measures the steps recorded per second, counted from
              the streams, over --steps-window from a second after every run
              sent its first line (or until the first run ends), and the
              server's and the database's CPU time per step in it. The
              server needs --max-continuations of at least --steps-runs.
              Not run by default: name it, --phases steps. Needs --dsn.
  bulk-flood  what bulks of the largest body cost the server: --bulk-flood-n
              POST /api/decisions of 1 MiB each, {"decisions":[{},{},…]}
              (349,520 empty entries), from the one token, released in the
              same instant; --bulk-flood-rounds times, each round when the
              last one's answers arrived. Measures the server's RSS before
              and at the peak (sampled every 10 ms at least) and the answers
              (400 invalid_bulk; 429 with Retry-After; anything else
              fails). Not run by default: name it, --phases bulk-flood.
  followups   whether a long transcript makes a turn slow: --followups-n
              runs are prepared settled, each after --followup-turns turns
              (each turn a message, a round calling slow_task for 0 s, its
              result, an answer; no approval). Then, in --followups-rounds
              rounds that alternate which goes first, first turns (streamed
              POST /api/runs of the same configuration) and follow-ups
              (streamed POST /api/runs/:id/messages, each to a run of its
              own) are posted, --followups-in-flight of a kind in flight at
              all times (each client posts its next when its last stream
              ended), --followups-n of each kind in all. Measures both
              kinds' POST → first line p50 / p99 and their ratio (the
              target: a follow-up within 1.2× a first turn). The server
              needs --max-continuations of at least --followups-in-flight.
              Not run by default: name it, --phases followups. Needs --dsn.

With --dsn (the server's database) it creates its user, a token, the load
configurations and the waiting runs itself, in bulk; TURNSTILE_STATE_KEYS
must then be the server's. Without --dsn it needs --token (scopes run:start
and run:decide) and the configurations applied beforehand:
  loadtest --print-config hold --hold 90s > hold.yaml   (likewise first-line,
  quick) and turnstile config apply hold.yaml.

The server's RSS and CPU time, and a local database server's CPU time, are
read from /proc (the processes listening on the ports of --url and --dsn,
or --pid); the report gives the CPU time per decision.

Every phase but signin and bulk-flood acts as one user, with more requests
and streams open at once than a server allows one user by default: start
the server with --max-user-requests 0 --max-user-streams 0.

The server needs one file descriptor per stream: start it under
"ulimit -n 65536" (Go raises the soft limit to the hard one by itself), and
with a long --lease (e.g. 10m) so that 10,000 held continuations do not
renew their leases every 10 s. This command raises its own limit.

Example, against "turnstile serve --keepalive 2s --max-continuations 20000
--workers 0 --lease 10m":

  go run ./cmd/loadtest --dsn 'root@tcp(127.0.0.1:3306)/turnstile_load' \
      --keepalive 2s --phases streams,first-line

and against "turnstile serve --addr 127.0.0.1:18181 --trusted-proxies
127.0.0.1":

  go run ./cmd/loadtest --url http://127.0.0.1:18181 --phases signin
  go run ./cmd/loadtest --url http://127.0.0.1:18181 --phases signin --signin-target name

Flags:
`

// parseOptions reads the flags; TURNSTILE_DSN is --dsn's default. It
// returns flag.ErrHelp for --help, and an error naming the flag for any
// value out of range.
func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageText)
		fs.PrintDefaults()
	}
	o := &options{}
	rawURL := fs.String("url", "http://127.0.0.1:8080", "base URL of the running server")
	fs.StringVar(&o.token, "token", "", "bearer token (tst_…) with run:start and run:decide; created when --dsn is given and this is empty")
	fs.StringVar(&o.dsn, "dsn", getenv("TURNSTILE_DSN"), "the server's MySQL DSN, to create the user, token, configurations and waiting runs directly [TURNSTILE_DSN]")
	fs.StringVar(&o.user, "user", "loadtest", "with --dsn: the user that owns the runs and decides them (created when absent, with the approve grant and no password)")
	phases := fs.String("phases", strings.Join(defaultPhases, ","), "comma-separated phases to run: streams, first-line, burst, durable, signin, followers, steps, bulk-flood, followups, feed (burst, signin, followers, steps, bulk-flood, followups and feed only when named)")
	fs.IntVar(&o.streams, "streams", 10000, "streams phase: concurrent streamed continuations")
	fs.DurationVar(&o.hold, "hold", 90*time.Second, "streams phase: how long each continuation works silently after the approval (at most 120s)")
	fs.IntVar(&o.openConcurrency, "open-concurrency", 256, "streams phase: decisions posted at once while the streams open (a stream frees its slot at its first line)")
	fs.DurationVar(&o.keepalive, "keepalive", 2*time.Second, "the server's --keepalive: keepalive lateness is measured against it")
	fs.IntVar(&o.pid, "pid", 0, "pid of the server, for its RSS; found by the listening port of --url when 0")
	fs.DurationVar(&o.sampleEvery, "sample-every", 250*time.Millisecond, "how often the server's RSS is sampled (the signin phase's at least every 10ms)")
	fs.IntVar(&o.firstLineN, "first-line-n", 100, "first-line phase: decisions posted at the same moment")
	fs.IntVar(&o.firstLineRounds, "first-line-rounds", 5, "first-line phase: how many times")
	fs.IntVar(&o.firstLineSerial, "first-line-serial", 20, "first-line phase: decisions posted one at a time first, for the floor without contention (0: none)")
	fs.IntVar(&o.steadyN, "steady-n", 100, "first-line phase, steady part: decisions kept in flight at all times, by as many clients")
	fs.IntVar(&o.steadyDecisions, "steady-decisions", 1000, "first-line phase, steady part: decisions posted in all (at least --steady-n)")
	fs.IntVar(&o.burstN, "burst-n", 2000, "burst phase: streamed decisions posted in the same instant")
	fs.StringVar(&o.burstSurface, "burst-surface", surfaceInbox, "burst phase: inbox (POST /inbox/runs/:id/decision, one signed-in session per decision; needs --dsn) or api (POST /api/runs/:id/decisions)")
	fs.DurationVar(&o.burstHold, "burst-hold", 30*time.Second, "burst phase: how long each continuation works silently after the approval (whole seconds, at most 120s)")
	fs.IntVar(&o.durableN, "durable-n", 5000, "durable phase: decisions")
	fs.IntVar(&o.durableConcurrency, "durable-concurrency", 64, "durable phase: concurrent clients")
	fs.IntVar(&o.signinN, "signin-n", 60, "signin phase: wrong-password sign-ins posted at the same moment, each from its own client, name and X-Forwarded-For address")
	fs.IntVar(&o.signinRounds, "signin-rounds", 3, "signin phase: how many times, each after the last one's answers arrived")
	fs.StringVar(&o.signinTarget, "signin-target", signinFlood, "signin phase: flood (each attempt its own name and address), name (a round's attempts for one name from one address) or address (from one address, a name each)")
	fs.IntVar(&o.followers, "followers", 10000, "followers phase: event-stream followers")
	fs.IntVar(&o.followedRuns, "followed-runs", 1000, "followers phase: continuing runs they follow, evenly")
	fs.DurationVar(&o.followTick, "follow-tick", time.Second, "followers phase: how long each of a run's slow_task calls takes: a step every tick")
	fs.DurationVar(&o.followWindow, "follow-window", 15*time.Second, "followers phase: each of the two measuring windows, without and with followers")
	fs.IntVar(&o.stepsRuns, "steps-runs", 2000, "steps phase: runs continuing at once")
	fs.IntVar(&o.stepsCalls, "steps-calls", 100, "steps phase: slow_task calls of 0 s per run (a run records that many steps and 3 more)")
	fs.DurationVar(&o.stepsWindow, "steps-window", 10*time.Second, "steps phase: the measuring window while every run continues")
	fs.IntVar(&o.bulkFloodN, "bulk-flood-n", 40, "bulk-flood phase: bulks of 1 MiB posted at the same moment by the one user")
	fs.IntVar(&o.bulkFloodRounds, "bulk-flood-rounds", 3, "bulk-flood phase: how many times, each after the last one's answers arrived")
	fs.IntVar(&o.followupsN, "followups-n", 1000, "followups phase: follow-ups posted in all, each to a settled run of its own, and as many first turns")
	fs.IntVar(&o.followupsInFlight, "followups-in-flight", 100, "followups phase: turns of one kind kept in flight at all times, by as many clients")
	fs.IntVar(&o.followupsRounds, "followups-rounds", 5, "followups phase: rounds, each of --followups-n/rounds first turns and as many follow-ups, which goes first alternating")
	fs.IntVar(&o.followupTurns, "followup-turns", 10, "followups phase: turns each run has done before its follow-up (so the follow-up reads a transcript of that many turns)")
	fs.IntVar(&o.feedClients, "feed-clients", 1000, "feed phase: clients of GET /api/feed")
	fs.IntVar(&o.feedChanges, "feed-changes", 10000, "feed phase: run changes made while they listen (four per run)")
	fs.IntVar(&o.feedRate, "feed-rate", 100, "feed phase: run changes a second (0: as fast as they go)")
	fs.IntVar(&o.setupConcurrency, "setup-concurrency", 32, "runs started at once while preparing a phase")
	fs.DurationVar(&o.firstLineHold, "first-line-hold", 2*time.Second, "first-line phase: how long each continuation works silently after its first line, so that a burst's continuations do not finish while the rest of it waits; in the steady part, each client posts about one decision per hold")
	fs.StringVar(&o.printConfig, "print-config", "", "print the hold, first-line, quick or burst configuration as YAML for \"turnstile config apply\" (needed without --dsn), and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if o.url, err = parseBaseURL(*rawURL); err != nil {
		return nil, err
	}
	if o.phases, err = parsePhases(*phases); err != nil {
		return nil, err
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// parseBaseURL accepts an http(s) URL with a host and nothing after the
// path's root.
func parseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url must be an http:// or https:// URL with a host, like http://127.0.0.1:8080, not %q", raw)
	}
	if u.Path != "" || u.RawQuery != "" {
		return nil, fmt.Errorf("--url is the server's base URL, without a path or query, not %q", raw)
	}
	return u, nil
}

// parsePhases reads a comma-separated list of known phases, each at most
// once, and returns them in the order they run.
func parsePhases(csv string) ([]string, error) {
	seen := map[string]bool{}
	for _, p := range strings.Split(csv, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(allPhases, p) {
			return nil, fmt.Errorf("--phases: unknown phase %q (want %s)", p, strings.Join(allPhases, ", "))
		}
		if seen[p] {
			return nil, fmt.Errorf("--phases: %q is named twice", p)
		}
		seen[p] = true
	}
	if len(seen) == 0 {
		return nil, errors.New("--phases names no phase")
	}
	var out []string
	for _, p := range allPhases {
		if seen[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

func (o *options) validate() error {
	switch {
	case o.printConfig != "" && !slices.Contains(configNames, o.printConfig):
		return fmt.Errorf("--print-config must be %s, not %q", strings.Join(configNames, ", "), o.printConfig)
	case o.printConfig != "":
		// Only --hold matters for printing.
	case o.dsn == "" && o.token == "" && o.needsRuns():
		return errors.New("give --dsn (the server's database; the command creates its own token and runs) or --token")
	case o.token != "" && !strings.HasPrefix(o.token, "tst_"):
		return errors.New("--token must be a tst_… token from turnstile token create")
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"--streams", o.streams}, {"--open-concurrency", o.openConcurrency}, {"--first-line-n", o.firstLineN},
		{"--first-line-rounds", o.firstLineRounds}, {"--steady-n", o.steadyN}, {"--steady-decisions", o.steadyDecisions},
		{"--durable-n", o.durableN}, {"--burst-n", o.burstN},
		{"--durable-concurrency", o.durableConcurrency}, {"--signin-n", o.signinN}, {"--signin-rounds", o.signinRounds},
		{"--setup-concurrency", o.setupConcurrency}, {"--followers", o.followers}, {"--followed-runs", o.followedRuns},
		{"--steps-runs", o.stepsRuns}, {"--steps-calls", o.stepsCalls},
		{"--bulk-flood-n", o.bulkFloodN}, {"--bulk-flood-rounds", o.bulkFloodRounds},
		{"--followups-n", o.followupsN}, {"--followups-in-flight", o.followupsInFlight},
		{"--followups-rounds", o.followupsRounds}, {"--followup-turns", o.followupTurns},
		{"--feed-clients", o.feedClients}, {"--feed-changes", o.feedChanges}} {
		if c.v < 1 {
			return fmt.Errorf("%s must be at least 1, not %d", c.name, c.v)
		}
	}
	switch {
	case o.firstLineSerial < 0:
		return fmt.Errorf("--first-line-serial must be 0 or more, not %d", o.firstLineSerial)
	case o.steadyN > o.steadyDecisions:
		return fmt.Errorf("--steady-n (%d) must not exceed --steady-decisions (%d), or some clients would post nothing and fewer would be in flight",
			o.steadyN, o.steadyDecisions)
	case o.signinTarget != signinFlood && o.signinTarget != signinOneName && o.signinTarget != signinOneAddr:
		return fmt.Errorf("--signin-target must be %s, %s or %s, not %q", signinFlood, signinOneName, signinOneAddr, o.signinTarget)
	case o.signinTarget == signinFlood && o.signinN*o.signinRounds > maxFloodAddrs:
		return fmt.Errorf("--signin-n × --signin-rounds (%d) must not exceed %d, the distinct 10.77.x.y addresses the attempts come from",
			o.signinN*o.signinRounds, maxFloodAddrs)
	case o.pid < 0:
		return fmt.Errorf("--pid must be a process id, not %d", o.pid)
	case o.keepalive <= 0:
		return fmt.Errorf("--keepalive must be positive, not %s", o.keepalive)
	case o.sampleEvery <= 0:
		return fmt.Errorf("--sample-every must be positive, not %s", o.sampleEvery)
	case o.hold < time.Second || o.hold > maxHold:
		return fmt.Errorf("--hold must be between 1s and %s (slow_task's limit), not %s", maxHold, o.hold)
	case o.hold%time.Second != 0:
		return fmt.Errorf("--hold must be whole seconds, not %s", o.hold)
	case o.firstLineHold < 0 || o.firstLineHold > maxHold || o.firstLineHold%time.Second != 0:
		return fmt.Errorf("--first-line-hold must be whole seconds between 0s and %s, not %s", maxHold, o.firstLineHold)
	case o.burstHold < time.Second || o.burstHold > maxHold || o.burstHold%time.Second != 0:
		return fmt.Errorf("--burst-hold must be whole seconds between 1s and %s, not %s", maxHold, o.burstHold)
	case slices.Contains(o.phases, phaseBurst) && o.burstHold < 2*o.keepalive:
		return fmt.Errorf("--burst-hold (%s) must be at least twice --keepalive (%s), or the burst's streams see no keepalive to time", o.burstHold, o.keepalive)
	case o.burstSurface != surfaceInbox && o.burstSurface != surfaceAPI:
		return fmt.Errorf("--burst-surface must be inbox or api, not %q", o.burstSurface)
	case slices.Contains(o.phases, phaseBurst) && o.burstSurface == surfaceInbox && o.dsn == "":
		return errors.New("the burst phase through the inbox needs --dsn, to sign its people in (or give --burst-surface api)")
	case o.followTick < 100*time.Millisecond || o.followTick > maxHold:
		return fmt.Errorf("--follow-tick must be between 100ms and %s, not %s", maxHold, o.followTick)
	case o.followWindow < time.Second:
		return fmt.Errorf("--follow-window must be at least 1s, not %s", o.followWindow)
	case o.stepsWindow < time.Second:
		return fmt.Errorf("--steps-window must be at least 1s, not %s", o.stepsWindow)
	case o.feedRate < 0:
		return fmt.Errorf("--feed-rate must be 0 (as fast as they go) or more, not %d", o.feedRate)
	case slices.Contains(o.phases, phaseFeed) && o.dsn == "":
		return errors.New("the feed phase needs --dsn: it makes the run changes itself, in another process than the server")
	case slices.Contains(o.phases, phaseSteps) && o.dsn == "":
		return errors.New("the steps phase needs --dsn: it saves its configuration itself")
	case o.followupsInFlight > o.followupsN/o.followupsRounds:
		return fmt.Errorf("--followups-in-flight (%d) must not exceed --followups-n / --followups-rounds (%d), or some clients would post nothing in a round",
			o.followupsInFlight, o.followupsN/o.followupsRounds)
	case slices.Contains(o.phases, phaseFollowups) && o.dsn == "":
		return errors.New("the followups phase needs --dsn: it prepares its settled runs through the engine")
	case slices.Contains(o.phases, phaseFollowers) && o.dsn == "":
		return errors.New("the followers phase needs --dsn: it runs the followed continuations itself and reads the database's counters")
	case slices.Contains(o.phases, phaseStreams) && o.hold < 2*o.keepalive:
		return fmt.Errorf("--hold (%s) must be at least twice --keepalive (%s), or a held stream sees no keepalive to time", o.hold, o.keepalive)
	}
	return nil
}

// needsRuns reports whether a phase decides runs, which takes --dsn or
// --token; signin only signs in, and fails.
func (o *options) needsRuns() bool {
	return slices.ContainsFunc(o.phases, func(p string) bool { return p != phaseSignin })
}

// serverPort is the TCP port of the base URL.
func (o *options) serverPort() int {
	port := o.url.Port()
	if port == "" {
		if o.url.Scheme == "https" {
			return 443
		}
		return 80
	}
	var p int
	fmt.Sscan(port, &p)
	return p
}

// loopback reports whether the URL's host is this machine, where the
// server's RSS can be read.
func (o *options) loopback() bool {
	host := o.url.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
