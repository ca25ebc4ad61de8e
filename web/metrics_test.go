package web_test

import (
	"context"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// scrape is one answer of GET /metrics, parsed.
type scrape map[string]*dto.MetricFamily

// scrapeMetrics reads /metrics the way Prometheus does, without signing in.
func (a *testApp) scrapeMetrics(t testing.TB) scrape {
	t.Helper()
	res, err := http.Get(a.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: status %d", res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET /metrics: Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return fams
}

// series finds the series of a family whose labels are exactly labels
// ("k=v" each); nil when there is none.
func (s scrape) series(name string, labels ...string) *dto.Metric {
	f := s[name]
	if f == nil {
		return nil
	}
	sort.Strings(labels)
	for _, m := range f.GetMetric() {
		var got []string
		for _, l := range m.GetLabel() {
			got = append(got, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(got)
		if strings.Join(got, ",") == strings.Join(labels, ",") {
			return m
		}
	}
	return nil
}

// value is a counter's or a gauge's value; the test fails when the series
// does not exist.
func (s scrape) value(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	m := s.series(name, labels...)
	switch {
	case m == nil:
		t.Fatalf("no series %s%v", name, labels)
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	default:
		t.Fatalf("%s%v is neither a counter nor a gauge", name, labels)
	}
	return 0
}

// histogramCounts is every series' sample count of a histogram, by the
// value of one label.
func (s scrape) histogramCounts(t testing.TB, name, label string) map[string]uint64 {
	t.Helper()
	f := s[name]
	if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("no histogram %s", name)
	}
	out := map[string]uint64{}
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return out
}

func sum(counts map[string]uint64) uint64 {
	var n uint64
	for _, c := range counts {
		n += c
	}
	return n
}

// eventKinds counts the recorded events of every run by kind.
func (a *testApp) eventKinds(t testing.TB) map[string]uint64 {
	t.Helper()
	var rows []struct {
		Kind string `db:"kind"`
		N    uint64 `db:"n"`
	}
	// A turn's marks are not steps (runtime.EventKind.Step).
	if err := a.DB.Select(&rows, `SELECT kind, COUNT(*) AS n FROM run_events
		WHERE kind NOT IN ('turn_started', 'turn_ended') GROUP BY kind`); err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, r := range rows {
		out[r.Kind] = r.N
	}
	return out
}

func TestMetricsCountWhatTheServerDoes(t *testing.T) {
	a := newApp(t, 100*time.Millisecond)
	ctx := context.Background()

	s := a.scrapeMetrics(t)
	for _, want := range []struct {
		name  string
		value float64
	}{
		{"turnstile_continuation_slots", 512},
		{"turnstile_continuation_slots_used", 0},
		{"turnstile_continuations_in_flight", 0},
		{"turnstile_workers_alive", 0},
		{"turnstile_oldest_decided_age_seconds", 0},
		{"turnstile_lease_recoveries_total", 0},
	} {
		if got := s.value(t, want.name); got != want.value {
			t.Errorf("at start %s = %v, want %v", want.name, got, want.value)
		}
	}
	if s["go_goroutines"] == nil || s["process_cpu_seconds_total"] == nil {
		t.Error("the Go runtime's and the process's metrics are missing")
	}

	// A streamed approval: three silent 300 ms rounds with a 100 ms
	// keepalive. While it runs, it holds a slot and is in flight.
	slow, _ := a.Waiting(t, "slow")
	approver := a.signIn(t, "approver")
	req := approver.postRequest("/inbox/runs/"+strconv.FormatInt(slow.RunID, 10)+"/decision",
		url.Values{"turn_digest": {slow.Digest}, "decision": {"approve"}}, "application/x-ndjson")
	res, err := approver.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]float64{}
	for l := range testrig.Read(t, res.Body, time.Now()).Each(t, 30*time.Second) {
		lines[l.Type()]++
		if l.Type() == "progress" && l.Int("steps") == 1 {
			// Sent from inside the continuation, 300 ms before its next
			// step.
			during := a.scrapeMetrics(t)
			if got := during.value(t, "turnstile_continuation_slots_used"); got != 1 {
				t.Errorf("slots used during the stream = %v, want 1", got)
			}
			if got := during.value(t, "turnstile_continuations_in_flight"); got != 1 {
				t.Errorf("continuations in flight during the stream = %v, want 1", got)
			}
		}
	}
	res.Body.Close()
	if lines["keepalive"] == 0 || lines["settled"] != 1 || lines["progress"] < 2 {
		t.Fatalf("stream lines %v, want progress lines, keepalives and one settled", lines)
	}

	// Stale digests, refused on three surfaces; each claim is lost.
	stale := strings.Repeat("0", 64)
	waiting, _ := a.Waiting(t, "refund")
	id := strconv.FormatInt(waiting.RunID, 10)
	if res, _ := approver.post("/inbox/runs/"+id+"/decision",
		url.Values{"turn_digest": {stale}, "decision": {"approve"}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("inbox decision with a stale digest: status %d, want 303", res.StatusCode)
	}
	a.session(t, "approver").call(t, a, http.MethodPost, runPathAPI(waiting.RunID, "/decisions"), approveBody(t, stale), nil).
		wantError(t, http.StatusConflict, "stale_turn")
	admin := a.signIn(t, "admin")
	if res, _ := admin.post("/playground/runs/"+id+"/resume",
		url.Values{"turn_digest": {stale}, "decision": {"approve"}}); res.StatusCode != http.StatusConflict {
		t.Errorf("playground resume with a stale digest: status %d, want 409", res.StatusCode)
	}
	// A malformed run id is refused as not_found, on the API.
	a.session(t, "approver").call(t, a, http.MethodGet, "/api/runs/x", "", nil).wantError(t, http.StatusNotFound, "not_found")

	// A durable decision: recorded, and waiting for a worker.
	c, err := a.Engine.Decide(ctx, runtime.DecideRequest{RunID: waiting.RunID, Digest: waiting.Digest,
		Decision: runtime.DecisionDeny, Actor: a.Users["approver"].Actor(), Path: runtime.PathDurable})
	if err != nil || c != nil {
		t.Fatalf("durable decision: %v, %v", c, err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := a.Store.Heartbeat(ctx, "metrics-test", "host", 1); err != nil {
		t.Fatal(err)
	}

	s = a.scrapeMetrics(t)
	for _, want := range []struct {
		name   string
		labels []string
		value  float64
	}{
		{"turnstile_decisions_total", []string{"path=request", "kind=approve"}, 1},
		{"turnstile_decisions_total", []string{"path=durable", "kind=deny"}, 1},
		{"turnstile_decisions_total", []string{"path=durable", "kind=approve"}, 0},
		{"turnstile_claims_lost_total", []string{"reason=stale_turn"}, 3},
		{"turnstile_claims_lost_total", []string{"reason=already_resuming"}, 0},
		{"turnstile_refusals_total", []string{"surface=inbox", "code=stale_turn"}, 1},
		{"turnstile_refusals_total", []string{"surface=api", "code=stale_turn"}, 1},
		{"turnstile_refusals_total", []string{"surface=playground", "code=stale_turn"}, 1},
		{"turnstile_refusals_total", []string{"surface=api", "code=not_found"}, 1},
		{"turnstile_stream_lines_total", []string{"type=progress"}, lines["progress"]},
		{"turnstile_stream_lines_total", []string{"type=keepalive"}, lines["keepalive"]},
		{"turnstile_stream_lines_total", []string{"type=settled"}, 1},
		{"turnstile_stream_lines_total", []string{"type=step"}, 0},
		{"turnstile_continuation_slots_used", nil, 0},
		{"turnstile_continuations_in_flight", nil, 0},
		{"turnstile_workers_alive", nil, 1},
	} {
		if got := s.value(t, want.name, want.labels...); got != want.value {
			t.Errorf("%s%v = %v, want %v", want.name, want.labels, got, want.value)
		}
	}
	if got := s.value(t, "turnstile_oldest_decided_age_seconds"); got < 0.02 || got > 60 {
		t.Errorf("age of the oldest decided run = %v s, want the 20 ms or so it waited", got)
	}
	wantSteps := a.eventKinds(t)
	for _, h := range []string{"turnstile_step_duration_seconds", "turnstile_step_commit_seconds"} {
		got := s.histogramCounts(t, h, "kind")
		for kind, n := range wantSteps {
			if got[kind] != n {
				t.Errorf("%s{kind=%q} counts %d steps, want the %d recorded", h, kind, got[kind], n)
			}
		}
		if sum(got) != sum(wantSteps) {
			t.Errorf("%s counts %d steps, want the %d recorded: %v", h, sum(got), sum(wantSteps), got)
		}
	}

	// A worker carries the durable decision out, and takes over a run
	// whose holder died (its lease expired): a lease recovery.
	held, err := a.Engine.Start(ctx, runtime.StartRequest{Configuration: "refund", Prompt: "Refund W-1",
		Owner: a.Users["owner"].Actor()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.DB.Exec(`UPDATE runs SET lease_expires_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, held.RunID()); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { a.Engine.Work(wctx, 1, 10*time.Millisecond) })
	deadline := time.Now().Add(20 * time.Second)
	for (a.Run(t, held.RunID()).Status == runtime.StatusRunning || a.Run(t, waiting.RunID).Status == runtime.StatusDecided) &&
		time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	wg.Wait()
	s = a.scrapeMetrics(t)
	for _, want := range []struct {
		name  string
		value float64
	}{
		{"turnstile_lease_recoveries_total", 1},
		{"turnstile_oldest_decided_age_seconds", 0},
		{"turnstile_continuations_in_flight", 0},
	} {
		if got := s.value(t, want.name); got != want.value {
			t.Errorf("after the worker %s = %v, want %v", want.name, got, want.value)
		}
	}
	if got, want := sum(s.histogramCounts(t, "turnstile_step_duration_seconds", "kind")), sum(a.eventKinds(t)); got != want {
		t.Errorf("after the worker the step histogram counts %d steps, want the %d recorded", got, want)
	}
}

func TestMetricsCountPlaygroundStreamLines(t *testing.T) {
	a := newApp(t, 0)
	admin := a.signIn(t, "admin")
	res, err := admin.http.Do(admin.postRequest("/playground/runs?stream=1",
		url.Values{"configuration": {"refund"}, "prompt": {"Refund W-2"}}, "application/x-ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	var steps, terminal float64
	for _, l := range testrig.ReadAll(t, res.Body) {
		switch l.Type() {
		case "step":
			steps++
		case "keepalive":
		default:
			terminal++
		}
	}
	res.Body.Close()
	if steps == 0 || terminal != 1 {
		t.Fatalf("%v steps and %v terminal lines, want steps and one terminal line", steps, terminal)
	}
	s := a.scrapeMetrics(t)
	if got := s.value(t, "turnstile_stream_lines_total", "type=step"); got != steps {
		t.Errorf("step lines counted %v, want the %v sent", got, steps)
	}
	if got := s.value(t, "turnstile_stream_lines_total", "type=terminal"); got != 1 {
		t.Errorf("terminal lines counted %v, want 1", got)
	}
}
