package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
)

func TestFollowersOptions(t *testing.T) {
	dsn := map[string]string{"TURNSTILE_DSN": "root@tcp(127.0.0.1:3306)/t"}
	o, err := parse(t, dsn, "--phases", "followers")
	if err != nil {
		t.Fatal(err)
	}
	if o.followers != 10000 || o.followedRuns != 1000 || o.followTick != time.Second || o.followWindow != 15*time.Second {
		t.Errorf("defaults: %d followers of %d runs, tick %s, window %s", o.followers, o.followedRuns, o.followTick, o.followWindow)
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"without dsn", nil, []string{"--token", "tst_x", "--phases", "followers"}, "the followers phase needs --dsn"},
		{"no followers", dsn, []string{"--followers", "0"}, "--followers must be at least 1, not 0"},
		{"no runs", dsn, []string{"--followed-runs", "0"}, "--followed-runs must be at least 1, not 0"},
		{"tick too short", dsn, []string{"--follow-tick", "10ms"}, "--follow-tick must be between 100ms"},
		{"window too short", dsn, []string{"--follow-window", "500ms"}, "--follow-window must be at least 1s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parse(t, tt.env, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseOptions(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestTickerConfigParses: the followers' configuration is valid, runs
// slow_task without a pause for a person, and has room for every round.
func TestTickerConfigParses(t *testing.T) {
	tools := builtin.Registry(builtin.Tools(nil)...)
	id, text := tickerConfig(1500*time.Millisecond, 40)
	cfg, err := configfile.Parse(id+".yaml", []byte(text), func(n string) bool { _, ok := tools[n]; return ok })
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if cfg.NeedsApproval(tools[builtin.NameSlowTask].Spec()) {
		t.Error("slow_task needs an approval: the runs would pause instead of continuing")
	}
	if cfg.MaxIterations != 2 || !strings.Contains(text, "seconds: 1.5,") || strings.Count(text, "name: slow_task") != 40 {
		t.Errorf("configuration %s: max_iterations %d\n%s", id, cfg.MaxIterations, text)
	}
}

// TestFollowEventsTimesLiveEvents: the client times the events recorded
// after it attached, against their created_at, and not the backlog's.
func TestFollowEventsTimesLiveEvents(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/runs/7/events" || r.Header.Get("Authorization") != "Bearer tst_x" {
			http.Error(w, "wrong request", http.StatusBadRequest)
			return
		}
		old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
		fmt.Fprintf(w, `{"type":"attached","first_seq":1,"latest_seq":1,"status":"running","live":true}`+"\n")
		fmt.Fprintf(w, `{"type":"event","seq":1,"created_at":%q}`+"\n", old)
		w.(http.Flusher).Flush()
		time.Sleep(20 * time.Millisecond) //nolint:forbidigo // the server's event is recorded after the attach
		now := time.Now().UTC().Format(time.RFC3339Nano)
		fmt.Fprintf(w, `{"type":"event","seq":2,"created_at":%q}`+"\n", now)
		fmt.Fprint(w, `{"type":"keepalive"}`+"\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	c := newClient(u, "tst_x", 4)
	defer c.close()
	ctx, cancel := context.WithCancel(context.Background())
	attached := 0
	var got []latencySample
	err := c.followEvents(ctx, 7, func() { attached++ }, func(s latencySample) {
		got = append(got, s)
		cancel()
	})
	if err != nil {
		t.Fatal(err)
	}
	if attached != 1 || len(got) != 1 {
		t.Fatalf("attached %d times, %d events timed; want 1 and 1 (the backlog's is not live)", attached, len(got))
	}
	if got[0].latency < 0 || got[0].latency > time.Second {
		t.Errorf("latency %s, want the few ms between its created_at and its arrival", got[0].latency)
	}
}

func TestFollowersRows(t *testing.T) {
	r := &followersResult{n: 100, runs: 10, latency: summary{n: 50, p50: 120 * time.Millisecond, p99: 300 * time.Millisecond, max: 400 * time.Millisecond},
		without: statusRates{questions: 1000, steps: 200}, with: statusRates{questions: 904.5, selects: 4, steps: 180}}
	rows := r.rows()
	if len(rows) != 2 || rows[0].verdict != "pass" || rows[1].verdict != "pass" || !strings.Contains(rows[1].measured, "+4.5/s") {
		t.Errorf("rows %+v, want both passing, +4.5/s", rows)
	}
	// 900 expected at 180 steps a second instead of 200.
	r.with.questions = 1400
	if rows := r.rows(); rows[1].verdict != "**fail**" {
		t.Errorf("400 more queries a second: %+v, want a failure", rows[1])
	}
}
