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

func TestStepsOptions(t *testing.T) {
	dsn := map[string]string{"TURNSTILE_DSN": "root@tcp(127.0.0.1:3306)/t"}
	o, err := parse(t, dsn, "--phases", "steps")
	if err != nil {
		t.Fatal(err)
	}
	if o.stepsRuns != 2000 || o.stepsCalls != 100 || o.stepsWindow != 10*time.Second {
		t.Errorf("defaults: %d runs of %d calls, window %s", o.stepsRuns, o.stepsCalls, o.stepsWindow)
	}
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"without dsn", nil, []string{"--token", "tst_x", "--phases", "steps"}, "the steps phase needs --dsn"},
		{"no runs", dsn, []string{"--steps-runs", "0"}, "--steps-runs must be at least 1, not 0"},
		{"no calls", dsn, []string{"--steps-calls", "0"}, "--steps-calls must be at least 1, not 0"},
		{"window too short", dsn, []string{"--steps-window", "500ms"}, "--steps-window must be at least 1s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parse(t, tt.env, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseOptions(%q) = %v, want an error containing %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestStepsConfigParses: the steps phase's configuration is valid, calls
// slow_task for 0 s without a pause for a person, as often as asked.
func TestStepsConfigParses(t *testing.T) {
	tools := builtin.Registry(builtin.Tools(nil)...)
	id, text := stepsConfig(30)
	cfg, err := configfile.Parse(id+".yaml", []byte(text), func(n string) bool { _, ok := tools[n]; return ok })
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if cfg.NeedsApproval(tools[builtin.NameSlowTask].Spec()) {
		t.Error("slow_task needs an approval: the runs would pause instead of continuing")
	}
	if cfg.MaxIterations != 2 || strings.Count(text, "seconds: 0,") != 30 || strings.Count(text, "name: slow_task") != 30 {
		t.Errorf("configuration %s: max_iterations %d\n%s", id, cfg.MaxIterations, text)
	}
}

// TestStreamStartCountsSteps: the client posts a streamed start and tells
// step lines from the rest, and a stream that does not end with done is
// an error.
func TestStreamStartCountsSteps(t *testing.T) {
	last := "done"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/runs" || r.Header.Get("Accept") != "application/x-ndjson" {
			http.Error(w, "wrong request", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
		for seq := 1; seq <= 3; seq++ {
			fmt.Fprintf(w, `{"type":"step","seq":%d,"step":{"kind":"tool"}}`+"\n", seq)
		}
		fmt.Fprint(w, `{"type":"keepalive"}`+"\n")
		fmt.Fprintf(w, `{"type":%q}`+"\n", last)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	c := newClient(u, "tst_x", 4)
	defer c.close()
	lines, steps := 0, 0
	done, err := c.streamStart(context.Background(), "cfg", "p", func(step bool) {
		lines++
		if step {
			steps++
		}
	})
	if err != nil || !done || lines != 5 || steps != 3 {
		t.Errorf("streamStart = %v, %v after %d lines, %d steps; want true, nil, 5, 3", done, err, lines, steps)
	}
	last = "awaiting_approval"
	if done, err := c.streamStart(context.Background(), "cfg", "p", func(bool) {}); done || err == nil {
		t.Errorf("a stream ending awaiting_approval = %v, %v; want false and an error", done, err)
	}
}

func TestStepsRows(t *testing.T) {
	r := &stepsResult{runs: 2000, calls: 100, window: 10 * time.Second, windowSteps: 30000, inFlightStart: 2000, inFlightEnd: 1990,
		cpu: cpuSample{server: 3 * time.Second, db: 6 * time.Second}}
	rows := r.rows()
	if len(rows) != 2 || !strings.Contains(rows[0].measured, "3,000/s") || rows[1].measured != "server 100 µs, database 200 µs" {
		t.Errorf("rows %+v, want 3,000/s and 100 µs / 200 µs a step", rows)
	}
	if rows := (&stepsResult{runs: 5, firstErr: "refused"}).rows(); len(rows) != 1 || rows[0].verdict != "**fail**" {
		t.Errorf("rows without steps %+v, want one failing row", rows)
	}
}
