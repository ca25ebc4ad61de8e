package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// The flood's body is the largest bulk of empty entries within 1 MiB.
func TestEmptyBulkBody(t *testing.T) {
	b := emptyBulkBody(bulkFloodBodyBytes)
	if len(b) > bulkFloodBodyBytes || len(b) < bulkFloodBodyBytes-3 {
		t.Errorf("body of %d bytes, want the most entries within %d", len(b), bulkFloodBodyBytes)
	}
	var v struct {
		Decisions []struct{} `json:"decisions"`
	}
	if err := json.Unmarshal(b, &v); err != nil || len(v.Decisions) != 349520 {
		t.Errorf("body decodes to %d entries, %v; want 349,520", len(v.Decisions), err)
	}
}

// TestBulkFloodPhase runs the phase against a server that reads every
// body to its end and answers the first of each round 400 invalid_bulk,
// the rest 429 with Retry-After but for one, whose 429 lacks it: that
// one is the phase's only failure.
func TestBulkFloodPhase(t *testing.T) {
	var served, bad atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if r.URL.Path != "/api/decisions" || r.Header.Get("Authorization") != "Bearer tst_x" || n != int64(len(emptyBulkBody(bulkFloodBodyBytes))) {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		switch k := served.Add(1); {
		case k%4 == 1:
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"code":"invalid_bulk","message":"at most 500"}}`)
		case k == 2 && bad.Add(1) == 1:
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"code":"too_many_requests","message":"wait"}}`)
		default:
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"code":"too_many_requests","message":"wait"}}`)
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	var stderr bytes.Buffer
	l := &loadtest{o: &options{url: u, bulkFloodN: 4, bulkFloodRounds: 2, sampleEvery: signinSampleEvery},
		c: newClient(u, "tst_x", 8), stderr: &stderr}
	res := l.bulkFloodPhase(t.Context())
	if res.posted != 8 || res.latency.n != 8 {
		t.Fatalf("posted %d, %d answers; want 8 and 8", res.posted, res.latency.n)
	}
	if res.failures != 1 || !strings.Contains(res.firstErr, "Retry-After") {
		t.Errorf("%d failures, first %q; want the one 429 without Retry-After", res.failures, res.firstErr)
	}
	if got := res.answersText(); got != "400 invalid_bulk: 2, 429 too_many_requests: 6" {
		t.Errorf("answers %q", got)
	}
	rows := res.rows()
	if rows[0].verdict != "—" || rows[0].measured != "not measured" {
		t.Errorf("RSS row %+v, want not measured without a server process", rows[0])
	}
	if rows[1].verdict != "**fail**" {
		t.Errorf("answers row %+v, want a failure", rows[1])
	}
	res.rssBefore, res.rssPeak, res.failures = 100<<20, 290<<20, 0
	if rows := res.rows(); rows[0].verdict != "pass" || rows[1].verdict != "pass" {
		t.Errorf("rows %+v, want +190 MiB and every answer expected to pass", rows)
	}
	res.rssPeak = 301 << 20
	if rows := res.rows(); rows[0].verdict != "**fail**" {
		t.Errorf("RSS row %+v, want +201 MiB to fail", rows[0])
	}
}
