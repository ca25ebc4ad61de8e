package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
)

func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = ms(float64(i + 1))
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"no values", nil, 50, 0},
		{"one value, p50", []time.Duration{ms(7)}, 50, ms(7)},
		{"one value, p99", []time.Duration{ms(7)}, 99, ms(7)},
		{"1..100, p50", hundred, 50, ms(50)},
		{"1..100, p99", hundred, 99, ms(99)},
		{"1..100, p100", hundred, 100, ms(100)},
		{"1..100, p0 is the least", hundred, 0, ms(1)},
		{"four values, p50 is the second", []time.Duration{1, 2, 3, 4}, 50, 2},
		{"four values, p99 is the last", []time.Duration{1, 2, 3, 4}, 99, 4},
		{"ten values, p99 is the last", []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarizeSortsACopy(t *testing.T) {
	in := []time.Duration{ms(30), ms(10), ms(20), -ms(5)}
	got := summarize(in)
	want := summary{n: 4, p50: ms(10), p99: ms(30), max: ms(30)}
	if got != want {
		t.Errorf("summarize(%v) = %+v, want %+v", in, got, want)
	}
	if in[0] != ms(30) {
		t.Errorf("summarize reordered its input: %v", in)
	}
	if got := summarize(nil); got != (summary{}) {
		t.Errorf("summarize(nil) = %+v, want zero", got)
	}
}

func TestMedianOfInts(t *testing.T) {
	in := []int{100, 3, 99, 100, 1}
	if got := median(in); got != 99 {
		t.Errorf("median(%v) = %d, want 99", in, got)
	}
	if in[0] != 100 || in[1] != 3 {
		t.Errorf("median reordered its input: %v", in)
	}
	if got := median([]int(nil)); got != 0 {
		t.Errorf("median(nil) = %d, want 0", got)
	}
}

func parse(t *testing.T, env map[string]string, args ...string) (*options, error) {
	t.Helper()
	return parseOptions(args, func(k string) string { return env[k] }, io.Discard)
}

func TestParseOptionsDefaults(t *testing.T) {
	o, err := parse(t, map[string]string{"TURNSTILE_DSN": "root@tcp(127.0.0.1:3306)/t"})
	if err != nil {
		t.Fatal(err)
	}
	if o.dsn != "root@tcp(127.0.0.1:3306)/t" {
		t.Errorf("dsn = %q, want TURNSTILE_DSN's", o.dsn)
	}
	if got, want := strings.Join(o.phases, ","), "streams,first-line,durable"; got != want {
		t.Errorf("phases = %s, want %s", got, want)
	}
	if o.streams != 10000 || o.firstLineN != 100 || o.durableN != 5000 || o.keepalive != 2*time.Second {
		t.Errorf("defaults: streams %d, first-line-n %d, durable-n %d, keepalive %s", o.streams, o.firstLineN, o.durableN, o.keepalive)
	}
	if o.burstN != 2000 || o.burstHold != 30*time.Second || o.burstSurface != surfaceInbox {
		t.Errorf("defaults: burst-n %d, burst-hold %s, burst-surface %q; want 2000, 30s, inbox", o.burstN, o.burstHold, o.burstSurface)
	}
	if o.steadyN != 100 || o.steadyDecisions != 1000 {
		t.Errorf("defaults: steady-n %d, steady-decisions %d; want 100, 1000", o.steadyN, o.steadyDecisions)
	}
	for which, want := range map[string]string{configHold: "loadtest-hold-90s", configFirstLine: "loadtest-hold-2s", configQuick: "loadtest-quick",
		configBurst: "loadtest-hold-30s"} {
		if got := o.configID(which); got != want {
			t.Errorf("configuration %s is %q, want %q", which, got, want)
		}
	}
	if o.serverPort() != 8080 || !o.loopback() {
		t.Errorf("port %d, loopback %v; want 8080, true", o.serverPort(), o.loopback())
	}
}

func TestParseOptionsPhasesInRunOrder(t *testing.T) {
	o, err := parse(t, nil, "--token", "tst_x", "--phases", " durable,streams,burst ", "--burst-surface", "api")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(o.phases, ","); got != "streams,burst,durable" {
		t.Errorf("phases = %s, want streams,burst,durable", got)
	}
}

func TestParseOptionsRefusals(t *testing.T) {
	dsn := map[string]string{"TURNSTILE_DSN": "root@tcp(127.0.0.1:3306)/t"}
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string // part of the error
	}{
		{"neither dsn nor token", nil, nil, "give --dsn"},
		{"token of another form", nil, []string{"--token", "abc"}, "tst_"},
		{"unknown phase", dsn, []string{"--phases", "streams,soak"}, `unknown phase "soak"`},
		{"phase twice", dsn, []string{"--phases", "durable,durable"}, "named twice"},
		{"no phase", dsn, []string{"--phases", " , "}, "names no phase"},
		{"no streams", dsn, []string{"--streams", "0"}, "--streams must be at least 1"},
		{"no open concurrency", dsn, []string{"--open-concurrency", "0"}, "--open-concurrency"},
		{"negative serial", dsn, []string{"--first-line-serial", "-1"}, "--first-line-serial"},
		{"no steady clients", dsn, []string{"--steady-n", "0"}, "--steady-n must be at least 1, not 0"},
		{"no steady decisions", dsn, []string{"--steady-decisions", "0"}, "--steady-decisions must be at least 1, not 0"},
		{"more steady clients than decisions", dsn, []string{"--steady-n", "200", "--steady-decisions", "150"},
			"--steady-n (200) must not exceed --steady-decisions (150)"},
		{"no durable clients", dsn, []string{"--durable-concurrency", "0"}, "--durable-concurrency"},
		{"no sign-ins", dsn, []string{"--signin-n", "0"}, "--signin-n must be at least 1, not 0"},
		{"no sign-in rounds", dsn, []string{"--signin-rounds", "0"}, "--signin-rounds must be at least 1, not 0"},
		{"more sign-ins than addresses", dsn, []string{"--signin-n", "1000", "--signin-rounds", "65"},
			"--signin-n × --signin-rounds (65000) must not exceed 64000"},
		{"signin with a phase that decides, neither dsn nor token", nil, []string{"--phases", "signin,durable"}, "give --dsn"},
		{"hold beyond slow_task", dsn, []string{"--hold", "121s"}, "--hold must be between 1s and 2m0s"},
		{"hold of a fraction", dsn, []string{"--hold", "10.5s"}, "whole seconds"},
		{"hold too short for keepalives", dsn, []string{"--hold", "3s", "--keepalive", "2s"}, "twice --keepalive"},
		{"no keepalive", dsn, []string{"--keepalive", "0s"}, "--keepalive must be positive"},
		{"negative pid", dsn, []string{"--pid", "-2"}, "--pid"},
		{"url without scheme", dsn, []string{"--url", "127.0.0.1:8080"}, "--url must be"},
		{"url with a path", dsn, []string{"--url", "http://127.0.0.1:8080/api"}, "without a path"},
		{"print what", nil, []string{"--print-config", "slow"}, "--print-config must be hold, first-line, quick, burst"},
		{"no burst", dsn, []string{"--burst-n", "0"}, "--burst-n must be at least 1, not 0"},
		{"burst hold of a fraction", dsn, []string{"--burst-hold", "2.5s"}, "--burst-hold must be whole seconds"},
		{"burst hold beyond slow_task", dsn, []string{"--burst-hold", "121s"}, "--burst-hold must be whole seconds between 1s and 2m0s"},
		{"burst hold too short for keepalives", dsn, []string{"--phases", "burst", "--burst-hold", "3s"}, "--burst-hold (3s) must be at least twice --keepalive (2s)"},
		{"burst through another surface", dsn, []string{"--burst-surface", "playground"}, "--burst-surface must be inbox or api"},
		{"burst through the inbox without a database", nil, []string{"--token", "tst_x", "--phases", "burst"}, "needs --dsn"},
		{"first-line hold of a fraction", dsn, []string{"--first-line-hold", "1.5s"}, "--first-line-hold must be whole seconds"},
		{"stray argument", dsn, []string{"now"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parse(t, tt.env, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseOptions(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestParseOptionsHelp(t *testing.T) {
	var out strings.Builder
	_, err := parseOptions([]string{"--help"}, func(string) string { return "" }, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage: loadtest", "keepalive lateness", "--decision-path durable", "-streams",
		"Then the steady part", "--steady-decisions were posted", "-steady-n int",
		"--trusted-proxies 127.0.0.1", "--phases signin", "-signin-n int", "-signin-rounds int", "-signin-target string", "--signin-target name",
		"--phases burst", "-burst-n int", "-burst-hold duration", "--keepalive + 1 s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q", want)
		}
	}
}

func TestParseOptionsPrintConfigNeedsNoServer(t *testing.T) {
	o, err := parse(t, nil, "--print-config", "hold", "--hold", "60s")
	if err != nil {
		t.Fatal(err)
	}
	id, text := o.configYAML(configHold)
	if id != "loadtest-hold-60s" || !strings.Contains(text, "seconds: 60") {
		t.Errorf("hold configuration %q:\n%s", id, text)
	}
}

func TestLoadConfigurationsParse(t *testing.T) {
	tools := builtin.Registry(builtin.Tools(nil)...)
	known := func(name string) bool { _, ok := tools[name]; return ok }
	o := &options{hold: 90 * time.Second, firstLineHold: 2 * time.Second}
	for _, which := range configNames {
		t.Run(which, func(t *testing.T) {
			id, text := o.configYAML(which)
			cfg, err := configfile.Parse(id+".yaml", []byte(text), known)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Identifier != id || !cfg.Active {
				t.Errorf("identifier %q, active %v", cfg.Identifier, cfg.Active)
			}
			// The hold works only if the read-only slow_task pauses for a
			// person.
			if !cfg.NeedsApproval(tools[builtin.NameSlowTask].Spec()) {
				t.Error("slow_task does not need an approval")
			}
			if want := fmt.Sprintf("seconds: %d,", int(o.configHoldOf(which)/time.Second)); !strings.Contains(text, want) {
				t.Errorf("configuration %s lacks %q:\n%s", which, want, text)
			}
			if cfg.PrivacyLevel != runtime.PrivacyMetadata {
				t.Errorf("privacy level %s", cfg.PrivacyLevel)
			}
		})
	}
}

func TestMarkdownTable(t *testing.T) {
	got := markdownTable(row{"measurement", "measured", "target", "result"}, []row{
		{"a|b", "1 ms", "≤ 5 ms", "pass"},
		{"longer measurement", "2", "—", "**fail**"},
	})
	want := "" +
		"| measurement        | measured | target | result   |\n" +
		"| ------------------ | -------- | ------ | -------- |\n" +
		"| a\\|b               | 1 ms     | ≤ 5 ms | pass     |\n" +
		"| longer measurement | 2        | —      | **fail** |\n"
	if got != want {
		t.Errorf("markdownTable:\n%s\nwant:\n%s", got, want)
	}
}

func TestReportRows(t *testing.T) {
	r := &report{
		streams: &streamsResult{n: 10000, opened: 10000, completed: 10000, peakOpen: 10000,
			rssBefore: 100 << 20, rssPeak: 600 << 20, rssAllOpen: 590 << 20,
			lateness: summary{n: 450000, p50: ms(1), p99: ms(1200), max: ms(2000)}},
		firstLine: &firstLineResult{n: 100, rounds: 5, serialN: 20, steadyN: 100, steadyDecisions: 1000,
			serial: summary{n: 20, p50: ms(4), p99: ms(6)},
			steady: summary{n: 1000, p50: ms(3.9), p99: ms(12), max: ms(30)}, steadyHeaders: summary{n: 1000, p50: ms(2), p99: ms(8)},
			steadyInFlight: 100, steadyTime: 21 * time.Second,
			// Far over the target, but a burst is a stress figure.
			firstLine: summary{n: 500, p50: ms(160), p99: ms(240)}, headers: summary{n: 500}},
		durable: &durableResult{n: 5000, concurrency: 64, recorded: 5000, elapsed: 4 * time.Second, verified: 4999},
	}
	byName := map[string]row{}
	for _, rw := range r.rows() {
		byName[rw.measurement] = rw
	}
	checks := []struct{ measurement, verdict, measured string }{
		{"concurrent streamed continuations", "pass", "10,000 open at once"},
		{"server RSS before → at peak", "pass", "100 MiB → 600 MiB"},
		{"memory per open continuation", "—", "51.2 KiB ((peak − before) / N); 50.2 KiB with all open"},
		{"keepalive lateness p50 / p99 (max)", "**fail**", "1.00 ms / 1.20 s (2.00 s)"},
		{"POST → first line p50 / p99, one at a time", "—", "4.00 ms / 6.00 ms"},
		{"POST → first line p50 / p99, 100 in flight (steady)", "pass",
			"3.90 ms / 12 ms (1,000 decisions; headers 2.00 ms / 8.00 ms; median 100 in flight)"},
		{"POST → first line p50 / p99, 100 posted in the same instant", "—", "160 ms / 240 ms (500 decisions"},
		// 1,250/s, but one decision is missing from the database.
		{"durable decisions recorded per second", "**fail**", "1,250/s"},
	}
	for _, c := range checks {
		got, ok := byName[c.measurement]
		if !ok {
			t.Errorf("no row %q; rows: %v", c.measurement, r.rows())
			continue
		}
		if got.verdict != c.verdict || !strings.Contains(got.measured, c.measured) {
			t.Errorf("row %q = %q, %s; want %q in it, %s", c.measurement, got.measured, got.verdict, c.measured, c.verdict)
		}
	}
	// The target is on the steady row, not on the burst's.
	for measurement, target := range map[string]string{
		"POST → first line p50 / p99, 100 in flight (steady)":         "≤ 5 ms / ≤ 20 ms",
		"POST → first line p50 / p99, 100 posted in the same instant": "— (a stress figure)",
	} {
		if got := byName[measurement].target; got != target {
			t.Errorf("row %q has target %q, want %q", measurement, got, target)
		}
	}
	var out strings.Builder
	r.write(&out)
	for _, want := range []string{"- first-line: 1,520 runs prepared",
		"20 one at a time, then 1,000 with 100 in flight in 21.00 s (47/s; first line max 30 ms), then 5 rounds of 100 at once"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestSteadyRowVerdict(t *testing.T) {
	tests := []struct {
		name     string
		p50, p99 time.Duration
		failures int
		want     string
	}{
		{"within both", ms(5), ms(20), 0, "pass"},
		{"p50 over", ms(5.1), ms(20), 0, "**fail**"},
		{"p99 over", ms(2), ms(21), 0, "**fail**"},
		{"a decision failed", ms(2), ms(3), 1, "**fail**"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &firstLineResult{steadyN: 100, steady: summary{n: 1000, p50: tt.p50, p99: tt.p99}, failures: tt.failures, firstErr: "x"}
			if got := f.steadyRow().verdict; got != tt.want {
				t.Errorf("verdict = %s, want %s", got, tt.want)
			}
			// The burst row never carries a verdict, however slow.
			f.firstLine = summary{n: 500, p50: tt.p50, p99: tt.p99}
			if got := f.burstRow().verdict; got != "—" {
				t.Errorf("burst verdict = %s, want —", got)
			}
		})
	}
}

func TestReportRowsOfFailedPhases(t *testing.T) {
	r := &report{
		streams:   &streamsResult{n: 10, failures: 10, firstErr: "connection refused", rssBefore: -1, rssPeak: -1},
		firstLine: &firstLineResult{n: 100, steadyN: 100, failures: 1, firstErr: "401 Unauthorized"},
		durable:   &durableResult{n: 5, failures: 1, firstErr: errNotDurable.Error(), verified: -1},
	}
	for _, rw := range r.rows() {
		if strings.HasPrefix(rw.measurement, "server RSS") {
			if rw.measured != "not measured" {
				t.Errorf("RSS row %q", rw.measured)
			}
			continue
		}
		if strings.HasSuffix(rw.measurement, "posted in the same instant") {
			if rw.verdict != "—" || rw.measured != "no first line: 401 Unauthorized" {
				t.Errorf("burst row %q, %s; want no first line, —", rw.measured, rw.verdict)
			}
			continue
		}
		if rw.verdict != "**fail**" {
			t.Errorf("row %q is %s, want a failure", rw.measurement, rw.verdict)
		}
	}
	var out strings.Builder
	r.write(&out)
	for _, want := range []string{"none opened: connection refused", "no first line: 401 Unauthorized", "--decision-path durable"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestCommandLineRedacts(t *testing.T) {
	got := commandLine([]string{"--dsn", "app:s3cret@tcp(127.0.0.1:3306)/t", "--token=tst_abcdef", "--streams", "10000",
		"-token", "tst_123", "--dsn=root@tcp(127.0.0.1:3306)/x"})
	for _, secret := range []string{"s3cret", "tst_abcdef", "tst_123"} {
		if strings.Contains(got, secret) {
			t.Errorf("command line %q shows %q", got, secret)
		}
	}
	want := "go run ./cmd/loadtest --dsn 'app:…@tcp(127.0.0.1:3306)/t' --token=tst_… --streams 10000 -token tst_… " +
		"'--dsn=root@tcp(127.0.0.1:3306)/x'"
	if got != want {
		t.Errorf("commandLine = %s\nwant          %s", got, want)
	}
}

func TestFormatting(t *testing.T) {
	ints := map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567", -4500: "-4,500"}
	for n, want := range ints {
		if got := fmtInt(n); got != want {
			t.Errorf("fmtInt(%d) = %q, want %q", n, got, want)
		}
	}
	sizes := map[int64]string{-1: "n/a", 512: "512 B", 27 << 10: "27.0 KiB", 267 << 20: "267 MiB", 3 << 29: "1.50 GiB"}
	for n, want := range sizes {
		if got := fmtBytes(n); got != want {
			t.Errorf("fmtBytes(%d) = %q, want %q", n, got, want)
		}
	}
	durs := map[time.Duration]string{450 * time.Microsecond: "450 µs", ms(4.567): "4.57 ms", ms(19.4): "19 ms",
		1500 * time.Millisecond: "1.50 s", 125 * time.Second: "125 s", -ms(2): "−2.00 ms"}
	for d, want := range durs {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tturnstile\nVmPeak:\t  900000 kB\nVmRSS:\t  123456 kB\nThreads:\t9\n"
	got, err := parseVmRSS([]byte(status))
	if err != nil || got != 123456*1024 {
		t.Errorf("parseVmRSS = %d, %v; want %d", got, err, 123456*1024)
	}
	if _, err := parseVmRSS([]byte("Name:\tkthreadd\n")); err == nil {
		t.Error("a status without VmRSS gave no error")
	}
}

func TestListeningInodes(t *testing.T) {
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:0CEA 00000000:0000 0A 00000000:00000000 00:00000000 00000000   104        0 4444 1 0000000000000000 100 0 0 10 0
`
	got := listeningInodes([]byte(table), 8080)
	if len(got) != 1 || got[0] != "4242" {
		t.Errorf("listeningInodes(8080) = %v, want [4242] (the established socket is no listener)", got)
	}
	if got := listeningInodes([]byte(table), 9999); len(got) != 0 {
		t.Errorf("listeningInodes(9999) = %v, want none", got)
	}
}

func TestLineEvent(t *testing.T) {
	tests := map[string]string{
		`{"type":"keepalive"}`:                           lineKeepalive,
		`{"type":"step","seq":3,"step":{"kind":"tool"}}`: lineStep,
		`{"type":"done","run_id":4,"answer":"Done."}`:    "done",
		`{"type":"error","code":"handed_over"}`:          "error",
		`{"type":"progress","steps":2}`:                  lineStep,
		`{"type":"keepalive","steps":2}`:                 lineKeepalive,
		`{"type":"settled"}`:                             "settled",
		`not json`:                                       "unreadable",
		`{}`:                                             "unknown",
	}
	for line, want := range tests {
		if got := lineEvent([]byte(line)); got != want {
			t.Errorf("lineEvent(%s) = %q, want %q", line, got, want)
		}
	}
}

func TestReadLines(t *testing.T) {
	long := strings.Repeat("x", 10000)
	body := "{\"a\":1}\n\n  \n{\"b\":\"" + long + "\"}\n{\"c\":3}"
	var got []string
	err := readLines(strings.NewReader(body), func(line []byte, at time.Time) bool {
		if at.IsZero() {
			t.Error("a line without its arrival time")
		}
		got = append(got, string(line))
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{"a":1}`, `{"b":"` + long + `"}`, `{"c":3}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines: got %d lines %.60q…, want %d", len(got), got, len(want))
	}
	n := 0
	readLines(strings.NewReader("1\n2\n3\n"), func([]byte, time.Time) bool { n++; return n < 2 })
	if n != 2 {
		t.Errorf("readLines went on after fn said stop: %d lines", n)
	}
}

func TestPerStream(t *testing.T) {
	r := &streamsResult{n: 10000, rssBefore: 100 << 20, rssPeak: 367 << 20}
	if got, want := r.perStream(), int64(267<<20)/10000; got != want {
		t.Errorf("perStream = %d, want %d", got, want)
	}
	r.rssBefore = -1
	if got := r.perStream(); got != -1 {
		t.Errorf("perStream without a before = %d, want -1", got)
	}
}

func TestSplitLateness(t *testing.T) {
	samples := []keepaliveSample{{at: 10, late: ms(900)}, {at: 20, late: ms(1)}, {at: 30, late: ms(2)}, {at: 40, late: ms(3)}, {at: 50, late: ms(800)}}
	all, held := splitLateness(samples, 20, 50)
	if all.n != 5 || all.max != ms(900) {
		t.Errorf("all = %+v, want 5 samples up to 900 ms", all)
	}
	if held.n != 3 || held.max != ms(3) {
		t.Errorf("held = %+v, want the 3 samples of [20, 50)", held)
	}
	if _, held := splitLateness(samples, 0, 0); held.n != 0 {
		t.Errorf("held without all streams open = %+v, want none", held)
	}
	if _, held := splitLateness(samples, 30, 0); held.n != 3 {
		t.Errorf("held with no stream ended = %+v, want the 3 samples from 30 on", held)
	}
}

func TestParseStatCPU(t *testing.T) {
	// A command name with a space and a parenthesis, as a process may
	// name itself.
	stat := "4242 (turn stile)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 75 0 0 20 0 9 0 100 1000000 2000 18446744073709551615"
	got, err := parseStatCPU([]byte(stat))
	if err != nil || got != 3250*time.Millisecond {
		t.Errorf("parseStatCPU = %v, %v; want 3.25s (325 ticks)", got, err)
	}
	if _, err := parseStatCPU([]byte("garbage")); err == nil {
		t.Error("garbage gave no error")
	}
}

func TestCPUNote(t *testing.T) {
	got := cpuNote(cpuSample{server: 730 * time.Millisecond, db: -1}, 500, "decision")
	if want := "; server CPU 730 ms (1.46 ms per decision)"; got != want {
		t.Errorf("cpuNote = %q, want %q", got, want)
	}
	if got := cpuNote(cpuSample{server: -1, db: -1}, 5, "decision"); got != "" {
		t.Errorf("cpuNote of nothing known = %q", got)
	}
}

// fakeRuns prepares runs 1…n without a server.
type fakeRuns struct{}

func (fakeRuns) waitingRuns(_ context.Context, _ string, n int) ([]waitingRun, error) {
	runs := make([]waitingRun, n)
	for i := range runs {
		runs[i] = waitingRun{id: int64(i + 1), digest: "d"}
	}
	return runs, nil
}

// TestFirstLinePhaseKeepsSteadyNInFlight runs the phase against a server
// whose continuations send a step, hold, then send "done": every run is
// decided once, and the steady part keeps --steady-n streams open, never
// more.
func TestFirstLinePhaseKeepsSteadyNInFlight(t *testing.T) {
	const hold = 30 * time.Millisecond
	var (
		mu            sync.Mutex
		decided       = map[string]int{}
		open, maxOpen atomic.Int64
	)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("POST /api/runs/{id}/decisions", func(w http.ResponseWriter, r *http.Request) {
		now := open.Add(1)
		defer open.Add(-1)
		for m := maxOpen.Load(); now > m && !maxOpen.CompareAndSwap(m, now); m = maxOpen.Load() {
		}
		mu.Lock()
		decided[r.PathValue("id")]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"type":"step","seq":1}`)
		w.(http.Flusher).Flush()
		time.Sleep(hold) // the continuation working silently
		fmt.Fprintln(w, `{"type":"done"}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	o := &options{url: base, firstLineSerial: 2, steadyN: 4, steadyDecisions: 24, firstLineN: 3, firstLineRounds: 1, firstLineHold: hold}
	l := &loadtest{o: o, c: newClient(base, "tst_x", 16), prep: fakeRuns{}, stderr: io.Discard}
	defer l.c.close()

	res := l.firstLinePhase(context.Background())
	if res.failures != 0 {
		t.Fatalf("%d failures, first: %s", res.failures, res.firstErr)
	}
	if res.completed != 29 || len(decided) != 29 {
		t.Errorf("%d completed, %d runs decided; want 29 and 29", res.completed, len(decided))
	}
	for id, n := range decided {
		if n != 1 {
			t.Errorf("run %s decided %d times", id, n)
		}
	}
	if res.serial.n != 2 || res.steady.n != 24 || res.steadyHeaders.n != 24 || res.firstLine.n != 3 {
		t.Errorf("timed %d serial, %d steady (%d headers), %d burst; want 2, 24, 24, 3",
			res.serial.n, res.steady.n, res.steadyHeaders.n, res.firstLine.n)
	}
	if res.steadyInFlight != 4 || maxOpen.Load() != 4 {
		t.Errorf("median in flight %d, server saw at most %d open; want 4 and 4", res.steadyInFlight, maxOpen.Load())
	}
	// 24 decisions, 4 at a time, each held 30 ms: six holds at least.
	if res.steadyTime < 6*hold {
		t.Errorf("steady part took %s, less than six holds", res.steadyTime)
	}
}

func TestBurstRows(t *testing.T) {
	b := &burstResult{n: 2000, surface: surfaceInbox, keepalive: 2 * time.Second, timed: 2000, late: 3,
		gaps:      summary{n: 30000, p50: ms(2000), p99: ms(2010), max: ms(5660)},
		firstLine: summary{n: 2000, p50: ms(2250), p99: ms(4120), max: ms(4170)}}
	r := &report{burst: b}
	byName := map[string]row{}
	for _, rw := range r.rows() {
		byName[rw.measurement] = rw
	}
	gaps := byName["burst of 2,000 (inbox): silence between two lines of a stream after its first, p50 / p99 (max)"]
	if gaps.verdict != "**fail**" || gaps.measured != "2.00 s / 2.01 s (5.66 s); 3 of 2,000 streams had a longer gap" ||
		gaps.target != "every gap ≤ 3.00 s (--keepalive + 1 s)" {
		t.Errorf("gap row %+v", gaps)
	}
	first := byName["burst of 2,000 (inbox): POST → first line p50 / p99"]
	if first.verdict != "—" || first.measured != "2.25 s / 4.12 s (max 4.17 s)" {
		t.Errorf("first-line row %+v", first)
	}
	b.late = 0
	if got := b.rows()[0].verdict; got != "pass" {
		t.Errorf("no late stream: verdict %s, want pass", got)
	}
	b.timed = 1999 // one stream never sent a line
	if got := b.rows()[0].verdict; got != "**fail**" {
		t.Errorf("a stream without lines: verdict %s, want a failure", got)
	}
	var out strings.Builder
	r.write(&out)
	if !strings.Contains(out.String(), "- burst: 2,000 runs prepared") {
		t.Errorf("report lacks the burst's line:\n%s", out.String())
	}
}

// TestBurstPhasePostsAllAtOnceAndTimesTheGaps runs the phase through the
// API against a server whose streams send a step and then keepalives every
// 20 ms, all but one: after its first line it stays silent for longer than
// --keepalive + 1 s. Every decision must be in flight at once, and that
// stream alone counted late.
func TestBurstPhasePostsAllAtOnceAndTimesTheGaps(t *testing.T) {
	const n = 12
	const keepalive = 20 * time.Millisecond
	var (
		mu            sync.Mutex
		decided       = map[string]int{}
		open, maxOpen atomic.Int64
		allIn         = make(chan struct{})
	)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("POST /api/runs/{id}/decisions", func(w http.ResponseWriter, r *http.Request) {
		now := open.Add(1)
		defer open.Add(-1)
		for m := maxOpen.Load(); now > m && !maxOpen.CompareAndSwap(m, now); m = maxOpen.Load() {
		}
		if now == n {
			close(allIn)
		}
		mu.Lock()
		decided[r.PathValue("id")]++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		fmt.Fprintln(w, `{"type":"step","seq":1}`)
		w.(http.Flusher).Flush()
		// No stream ends before every decision is in: they were all
		// posted at once.
		<-allIn
		silence := keepalive
		if r.PathValue("id") == "7" {
			silence = keepalive + 1100*time.Millisecond
		}
		for range 3 {
			time.Sleep(silence) // the continuation working silently
			fmt.Fprintln(w, `{"type":"keepalive"}`)
			w.(http.Flusher).Flush()
		}
		fmt.Fprintln(w, `{"type":"done"}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	o := &options{url: base, burstN: n, burstSurface: surfaceAPI, keepalive: keepalive, burstHold: time.Second}
	l := &loadtest{o: o, c: newClient(base, "tst_x", n), prep: fakeRuns{}, stderr: io.Discard}
	defer l.c.close()

	res := l.burstPhase(context.Background())
	if res.failures != 0 {
		t.Fatalf("%d failures, first: %s", res.failures, res.firstErr)
	}
	if res.completed != n || len(decided) != n || maxOpen.Load() != n {
		t.Errorf("%d completed, %d runs decided, at most %d open; want %d each", res.completed, len(decided), maxOpen.Load(), n)
	}
	if res.timed != n || res.firstLine.n != n || res.gaps.n != 4*n {
		t.Errorf("timed %d streams, %d first lines, %d gaps; want %d, %d, %d", res.timed, res.firstLine.n, res.gaps.n, n, n, 4*n)
	}
	if res.late != 1 || res.gaps.max < keepalive+time.Second {
		t.Errorf("%d late streams, longest gap %s; want 1, above %s", res.late, res.gaps.max, keepalive+time.Second)
	}
	if res.worstBefore != lineKeepalive && res.worstBefore != lineStep || res.worstTo != lineKeepalive {
		t.Errorf("longest gap from a %q line to a %q line; want to a keepalive", res.worstBefore, res.worstTo)
	}
}
