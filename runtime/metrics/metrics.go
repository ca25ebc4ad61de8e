// Package metrics is Turnstile's Prometheus metrics: what the engine does
// (continuations, steps, decisions, lease recoveries), what the web layer
// does (refusals, stream lines, the in-request continuation slots), and
// what the database knows of the whole cluster, read at scrape time. cmd
// wires one Metrics into the engine (as runtime.Metrics) and into the web
// layer, and serves it: serve at GET /metrics, work at --metrics-addr.
package metrics

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/turnstile-dev/turnstile/runtime"
)

var stepKinds = []runtime.EventKind{runtime.KindLLM, runtime.KindTool, runtime.KindSuspend, runtime.KindApproval,
	runtime.KindInput, runtime.KindCancel, runtime.KindSettle, runtime.KindUnavailable}

// scrapeTimeout bounds the database queries of one scrape.
const scrapeTimeout = 2 * time.Second

// Backlog is what the metrics read from the database at scrape time.
// Their answers are the cluster's, not this process's: every instance
// reports the same values.
type Backlog interface {
	WorkersAlive(ctx context.Context, window time.Duration) (int, error)
	// OldestDecidedAge is how long the oldest decided run has waited for
	// a worker; false when none waits.
	OldestDecidedAge(ctx context.Context) (time.Duration, bool, error)
}

// Metrics are Turnstile's Prometheus metrics; ServeHTTP answers a scrape.
// It implements runtime.Metrics for the engine and counts what the web
// layer does: refusals, stream lines and the in-request continuation
// slots. Each Metrics has a registry of its own, so tests can create
// several. A nil *Metrics measures nothing.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	log     *slog.Logger

	inFlight      prometheus.Gauge
	stepSeconds   map[runtime.EventKind]prometheus.Observer
	commitSeconds map[runtime.EventKind]prometheus.Observer
	stepVec       *prometheus.HistogramVec
	commitVec     *prometheus.HistogramVec
	decisions     *prometheus.CounterVec
	claimsLost    *prometheus.CounterVec
	recoveries    prometheus.Counter
	refusals      *prometheus.CounterVec
	lineVec       *prometheus.CounterVec
	expiries      *prometheus.CounterVec
	webhooks      *prometheus.CounterVec // see webhooks.go
	swept         *prometheus.CounterVec // see runtime/worker_sweep.go
}

var _ runtime.Metrics = (*Metrics)(nil)

// New returns the metrics on a registry of their own, with the Go
// runtime's and the process's collectors; log (nil discards) gets what a
// scrape could not read.
func New(log *slog.Logger) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), log: log}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Name: "turnstile_continuations_in_flight",
		Help: "Continuations running in this process now, inside requests and in its worker loops."})
	m.stepVec = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "turnstile_step_duration_seconds",
		Help:    "How long a recorded step took: the provider round or tool call, then its commit.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}}, []string{"kind"})
	m.commitVec = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "turnstile_step_commit_seconds",
		Help:    "How long a step's commit took: encoding the checkpoint, and the transaction of event, state and lease.",
		Buckets: prometheus.ExponentialBuckets(.0005, 2, 12)}, []string{"kind"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turnstile_decisions_total",
		Help: "Decisions that won their claim, by path (request or durable) and kind (approve, deny, input)."}, []string{"path", "kind"})
	m.claimsLost = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turnstile_claims_lost_total",
		Help: "Decisions whose claim someone else won, by reason (stale_turn, already_resuming, not_waiting)."}, []string{"reason"})
	m.recoveries = prometheus.NewCounter(prometheus.CounterOpts{Name: "turnstile_lease_recoveries_total",
		Help: "Running runs whose lease expired that this process's workers took over."})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turnstile_refusals_total",
		Help: "Requests refused with a code, by surface (inbox, api, playground) and code; busy is a 503 with every continuation slot taken."},
		[]string{"surface", "code"})
	m.lineVec = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turnstile_stream_lines_total",
		Help: "NDJSON lines written to clients, by type; type=\"keepalive\" counts the keepalives."}, []string{"type"})
	m.expiries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turnstile_decision_expiries_total",
		Help: "Pauses whose decision_timeout passed that this process's workers settled, by action (deny or escalate)."}, []string{"action"})
	for _, a := range []string{runtime.OnTimeoutDeny, runtime.OnTimeoutEscalate} {
		m.expiries.WithLabelValues(a)
	}
	m.reg.MustRegister(m.inFlight, m.stepVec, m.commitVec, m.decisions, m.claimsLost, m.recoveries, m.refusals, m.lineVec, m.expiries,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.webhooks = newWebhookCounter(m.reg)
	m.swept = newSweepCounter(m.reg)

	// The children the hot paths use exist from the start: no lookup by
	// label values on a step or a line, and every series shows 0 before
	// its first event.
	m.stepSeconds = make(map[runtime.EventKind]prometheus.Observer, len(stepKinds))
	m.commitSeconds = make(map[runtime.EventKind]prometheus.Observer, len(stepKinds))
	for _, k := range stepKinds {
		m.stepSeconds[k] = m.stepVec.WithLabelValues(string(k))
		m.commitSeconds[k] = m.commitVec.WithLabelValues(string(k))
	}
	for _, path := range []string{runtime.PathRequest, runtime.PathDurable} {
		for _, kind := range []string{runtime.DecisionApprove, runtime.DecisionDeny, runtime.DecisionMixed, runtime.DecisionInput} {
			m.decisions.WithLabelValues(path, kind)
		}
	}
	for _, c := range []runtime.Code{runtime.CodeStaleTurn, runtime.CodeAlreadyResuming, runtime.CodeNotWaiting} {
		m.claimsLost.WithLabelValues(string(c))
	}

	m.handler = promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(m.log.Handler(), slog.LevelWarn), ErrorHandling: promhttp.ContinueOnError,
		Registry: m.reg, Timeout: 2 * scrapeTimeout}))
	return m
}

// ServeHTTP answers a scrape in the Prometheus text format (or what the
// scraper negotiates).
func (m *Metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.handler.ServeHTTP(w, r) }

// ContinuationStarted implements runtime.Metrics.
func (m *Metrics) ContinuationStarted() {
	if m != nil {
		m.inFlight.Inc()
	}
}

// ContinuationEnded implements runtime.Metrics.
func (m *Metrics) ContinuationEnded() {
	if m != nil {
		m.inFlight.Dec()
	}
}

// StepRecorded implements runtime.Metrics.
func (m *Metrics) StepRecorded(kind runtime.EventKind, took, commit time.Duration) {
	if m == nil {
		return
	}
	step, ok := m.stepSeconds[kind]
	if !ok {
		step = m.stepVec.WithLabelValues(string(kind))
	}
	step.Observe(took.Seconds())
	c, ok := m.commitSeconds[kind]
	if !ok {
		c = m.commitVec.WithLabelValues(string(kind))
	}
	c.Observe(commit.Seconds())
}

// DecisionClaimed implements runtime.Metrics.
func (m *Metrics) DecisionClaimed(path, kind string) {
	if m != nil {
		m.decisions.WithLabelValues(path, kind).Inc()
	}
}

// ClaimLost implements runtime.Metrics.
func (m *Metrics) ClaimLost(reason runtime.Code) {
	if m != nil {
		m.claimsLost.WithLabelValues(string(reason)).Inc()
	}
}

// Recovered implements runtime.Metrics.
func (m *Metrics) Recovered() {
	if m != nil {
		m.recoveries.Inc()
	}
}

// DecisionExpired implements runtime.Metrics.
func (m *Metrics) DecisionExpired(action string) {
	if m != nil {
		m.expiries.WithLabelValues(action).Inc()
	}
}

// Refused counts a refusal on a surface (inbox, api, playground), by its
// code.
func (m *Metrics) Refused(surface, code string) {
	if m != nil {
		m.refusals.WithLabelValues(surface, code).Inc()
	}
}

// LineCounter returns what counts one stream line of a type: looked up
// once, so that writing a line costs no label lookup. Its series exists,
// at 0, from then on.
func (m *Metrics) LineCounter(typ string) func() {
	if m == nil {
		return func() {}
	}
	return m.lineVec.WithLabelValues(typ).Inc
}

// WatchBacklog adds what the database knows of the whole cluster, read at
// each scrape: the workers alive and the age of the oldest decided run. It
// errors when called twice.
func (m *Metrics) WatchBacklog(b Backlog) error {
	return m.reg.Register(&backlogCollector{backlog: b, log: m.log,
		workers: prometheus.NewDesc("turnstile_workers_alive",
			"Worker processes seen within the last 15 s, in the whole cluster (read from the database).", nil, nil),
		lag: prometheus.NewDesc("turnstile_oldest_decided_age_seconds",
			"How long the oldest decided run has waited for a worker, in the whole cluster; 0 when none waits.", nil, nil)})
}

// WatchDB adds the statistics of a connection pool (go_sql_*). It errors
// when called twice.
func (m *Metrics) WatchDB(db *sql.DB) error {
	return m.reg.Register(collectors.NewDBStatsCollector(db, "turnstile"))
}

// Feed is a process's change feed (GET /api/feed).
type Feed interface {
	// FeedClients is how many feed clients are attached now.
	FeedClients() int
	// FeedQueries counts the statements the feed sent the store.
	FeedQueries() int64
}

// WatchFeed adds a process's change feed: its clients, and the statements
// its poller (and its clients' catch-up reads) sent. It errors when
// called twice.
func (m *Metrics) WatchFeed(f Feed) error {
	return errors.Join(
		m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "turnstile_feed_clients",
			Help: "Clients of GET /api/feed attached to this process now."},
			func() float64 { return float64(f.FeedClients()) })),
		m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "turnstile_feed_queries_total",
			Help: "Statements this process's change feed sent the database: one poll per interval for all its clients, and catch-up reads."},
			func() float64 { return float64(f.FeedQueries()) })))
}

// Slots are a server's in-request continuation slots.
type Slots interface {
	// SlotsInUse is how many continuations run inside requests now.
	SlotsInUse() int
	// SlotsTotal is how many may (--max-continuations).
	SlotsTotal() int
}

// WatchSlots adds a server's in-request continuation slots: how many are
// taken, and how many there are. It errors when called twice.
func (m *Metrics) WatchSlots(s Slots) error {
	return errors.Join(
		m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "turnstile_continuation_slots_used",
			Help: "Continuations running inside requests now, each holding one of the --max-continuations slots."},
			func() float64 { return float64(s.SlotsInUse()) })),
		m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "turnstile_continuation_slots",
			Help: "How many continuations may run inside requests at once (--max-continuations)."},
			func() float64 { return float64(s.SlotsTotal()) })))
}

// backlogCollector reads the cluster's workers and decided runs from the
// database at each scrape, within scrapeTimeout. A value it cannot read
// is left out of that scrape (and logged) rather than failing the scrape.
type backlogCollector struct {
	backlog      Backlog
	log          *slog.Logger
	workers, lag *prometheus.Desc
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.workers
	ch <- c.lag
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if n, err := c.backlog.WorkersAlive(ctx, runtime.WorkerWindow); err != nil {
		c.log.Warn("metrics: workers alive", "err", err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(n))
	}
	if age, _, err := c.backlog.OldestDecidedAge(ctx); err != nil {
		c.log.Warn("metrics: oldest decided run", "err", err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, age.Seconds())
	}
}
