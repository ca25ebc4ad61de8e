package main

import (
	"context"
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
)

// fakeConversations prepares runs 101…100+n without a server.
type fakeConversations struct {
	fakeRuns
	turns *int
}

func (f fakeConversations) conversations(_ context.Context, n, turns int) (string, []int64, error) {
	*f.turns = turns
	runs := make([]int64, n)
	for i := range runs {
		runs[i] = int64(101 + i)
	}
	return "loadtest-conversation", runs, nil
}

func TestFollowupsOptions(t *testing.T) {
	o, err := parse(t, nil, "--token", "tst_x", "--phases", "first-line")
	if err != nil {
		t.Fatal(err)
	}
	if o.followupsN != 1000 || o.followupsInFlight != 100 || o.followupsRounds != 5 || o.followupTurns != 10 {
		t.Errorf("defaults = %d, %d, %d, %d; want 1000, 100, 5, 10", o.followupsN, o.followupsInFlight, o.followupsRounds, o.followupTurns)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--token", "tst_x", "--phases", "followups"}, "needs --dsn"},
		{[]string{"--token", "tst_x", "--followup-turns", "0"}, "--followup-turns must be at least 1"},
		{[]string{"--token", "tst_x", "--followups-n", "100", "--followups-rounds", "2"}, "--followups-in-flight (100) must not exceed"},
	} {
		if _, err := parse(t, nil, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: err = %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestFollowupsPhase runs the phase against a server whose streams send a
// step, wait a little and end with done: every prepared run gets exactly
// one follow-up, as many first turns are started, at most --followups-in-
// flight of either are open at once and never both kinds together, and
// the rounds alternate which kind goes first.
func TestFollowupsPhase(t *testing.T) {
	var (
		mu            sync.Mutex
		messaged      = map[string]int{}
		kinds         []string // the kind of every request, in arrival order
		starts        atomic.Int64
		open, maxOpen atomic.Int64
	)
	stream := func(w http.ResponseWriter, kind string) {
		now := open.Add(1)
		defer open.Add(-1)
		for m := maxOpen.Load(); now > m && !maxOpen.CompareAndSwap(m, now); m = maxOpen.Load() {
		}
		mu.Lock()
		kinds = append(kinds, kind)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintln(w, `{"type":"step","seq":1}`)
		w.(http.Flusher).Flush()
		time.Sleep(5 * time.Millisecond) // the rest of the turn
		fmt.Fprintln(w, `{"type":"done"}`)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("POST /api/runs", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Accept") != "application/x-ndjson" || !strings.Contains(string(body), `"configuration":"loadtest-conversation"`) {
			http.Error(w, "wrong start: "+string(body), http.StatusBadRequest)
			return
		}
		starts.Add(1)
		stream(w, "start")
	})
	mux.HandleFunc("POST /api/runs/{id}/messages", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Accept") != "application/x-ndjson" || !strings.Contains(string(body), `"content":`) {
			http.Error(w, "wrong message: "+string(body), http.StatusBadRequest)
			return
		}
		mu.Lock()
		messaged[r.PathValue("id")]++
		mu.Unlock()
		stream(w, "message")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	base, _ := url.Parse(srv.URL)
	turns := 0
	o := &options{url: base, followupsN: 24, followupsInFlight: 4, followupsRounds: 3, followupTurns: 7}
	l := &loadtest{o: o, c: newClient(base, "tst_x", 16), prep: fakeConversations{turns: &turns}, stderr: io.Discard}
	defer l.c.close()

	res := l.followupsPhase(context.Background())
	if res.failures != 0 {
		t.Fatalf("%d failures, first: %s", res.failures, res.firstErr)
	}
	if turns != 7 {
		t.Errorf("runs prepared with %d turns, want 7", turns)
	}
	if res.completed != 48 || starts.Load() != 24 || len(messaged) != 24 {
		t.Errorf("%d completed, %d started, %d runs messaged; want 48, 24, 24", res.completed, starts.Load(), len(messaged))
	}
	for id, n := range messaged {
		if n != 1 {
			t.Errorf("run %s got %d follow-ups", id, n)
		}
	}
	if res.first.n != 24 || res.next.n != 24 || res.firstHeaders.n != 24 || res.nextHeaders.n != 24 {
		t.Errorf("timed %d first turns (%d headers), %d follow-ups (%d headers); want 24 of each", res.first.n, res.firstHeaders.n,
			res.next.n, res.nextHeaders.n)
	}
	if maxOpen.Load() != 4 {
		t.Errorf("the server saw at most %d open, want 4", maxOpen.Load())
	}
	// 3 rounds of 8 of each kind, alternating: start×8, message×16,
	// start×16, message×8, in blocks, since a part begins when the last
	// one's streams ended.
	var blocks []string
	for i, k := range kinds {
		if i == 0 || k != kinds[i-1] {
			blocks = append(blocks, k)
		}
	}
	if want := []string{"start", "message", "start", "message"}; fmt.Sprint(blocks) != fmt.Sprint(want) {
		t.Errorf("the kinds came in blocks %v, want %v (round 1 start then message, round 2 message then start, round 3 start then message)", blocks, want)
	}
	if rows := res.rows(); len(rows) != 3 || !strings.Contains(rows[1].measurement, "after 7 turns") || rows[2].verdict == "" {
		t.Errorf("rows = %+v", rows)
	}
}

func TestFollowupsRows(t *testing.T) {
	r := &followupsResult{n: 1000, inFlight: 100, turns: 10, rounds: 5,
		first: summary{n: 1000, p50: ms(100), p99: ms(200)}, next: summary{n: 1000, p50: ms(110), p99: ms(260)}}
	rows := r.rows()
	if got := rows[2]; got.measured != "1.10× / 1.30×" || got.verdict != verdict(false) {
		t.Errorf("ratio row = %+v, want 1.10× / 1.30× and a fail (p99 over 1.2×)", got)
	}
	r.next.p99 = ms(230)
	if got := r.rows()[2]; got.measured != "1.10× / 1.15×" || got.verdict != "pass" {
		t.Errorf("ratio row = %+v, want 1.10× / 1.15× and a pass", got)
	}
	r.failures, r.firstErr = 1, "boom"
	if got := r.rows()[2]; got.verdict != verdict(false) {
		t.Errorf("a failure must fail the ratio: %+v", got)
	}
	if line := r.line(); !strings.Contains(line, "1,000 runs of 10 turns") || !strings.Contains(line, "**1 failed**, first: boom") {
		t.Errorf("line = %q", line)
	}
	empty := &followupsResult{firstErr: "the followups phase needs --dsn"}
	if got := empty.rows()[0].measured; !strings.Contains(got, "needs --dsn") {
		t.Errorf("a phase that measured nothing says %q", got)
	}
}
