package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The bulk-flood phase: what bulks of the largest body the API takes cost
// the server when one user sends many at once. Each body is 1 MiB of empty
// entries, {"decisions":[{},{},…]} (349,520 of them), which the server
// must refuse (invalid_bulk); a server that reads such a body whole before
// refusing it holds hundreds of MiB for each one at once.

// bulkFloodBodyBytes is the size of each body: the API's limit
// (web.maxAPIBytes).
const bulkFloodBodyBytes = 1 << 20

// targetBulkFloodRSSGrowth bounds what the flood may add to the server's
// RSS.
const targetBulkFloodRSSGrowth = 200 << 20

// bulkFloodResult is what the bulk-flood phase measured.
type bulkFloodResult struct {
	n, rounds int
	posted    int
	answers   map[string]int // every answer, by status and error code: "400 invalid_bulk"
	failures  int            // requests without an expected answer
	firstErr  string
	latencies []time.Duration
	latency   summary
	// Server RSS in bytes (-1: unknown): before the phase, and the highest
	// sample during it.
	rssBefore, rssPeak int64
	phaseTime          time.Duration
	cpu                cpuSample
}

func (r *bulkFloodResult) fail(err error) {
	failMu.Lock()
	defer failMu.Unlock()
	r.failures++
	if r.firstErr == "" {
		r.firstErr = err.Error()
	}
}

func (r *bulkFloodResult) answered(key string, took time.Duration) {
	failMu.Lock()
	defer failMu.Unlock()
	r.answers[key]++
	r.latencies = append(r.latencies, took)
}

// emptyBulkBody is the largest {"decisions":[{},{},…]} within size bytes.
func emptyBulkBody(size int) []byte {
	n := (size - len(`{"decisions":[]}`) + 1) / len(`{},`)
	b := bytes.NewBuffer(make([]byte, 0, size))
	b.WriteString(`{"decisions":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("{}")
	}
	b.WriteString("]}")
	return b.Bytes()
}

// bulkFloodPhase posts o.bulkFloodRounds rounds of o.bulkFloodN 1 MiB
// bulks released in the same instant, all with the command's one token;
// each round starts when the last one's answers all arrived.
func (l *loadtest) bulkFloodPhase(ctx context.Context) *bulkFloodResult {
	o := l.o
	res := &bulkFloodResult{n: o.bulkFloodN, rounds: o.bulkFloodRounds, answers: map[string]int{}, rssBefore: -1, rssPeak: -1, cpu: unknownCPU}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	body := emptyBulkBody(bulkFloodBodyBytes)
	res.rssBefore, _ = l.rss()
	sampler := l.sampleRSS(min(o.sampleEvery, signinSampleEvery), func() bool { return false })
	cpuStart := l.cpu()
	start := time.Now()
	for round := range o.bulkFloodRounds {
		if ctx.Err() != nil {
			break
		}
		gate := make(chan struct{})
		var wg sync.WaitGroup
		for range o.bulkFloodN {
			res.posted++
			wg.Go(func() {
				<-gate
				sent := time.Now()
				key, err := l.c.postBulk(ctx, body)
				if key != "" {
					res.answered(key, time.Since(sent))
				}
				if err != nil {
					res.fail(err)
				}
			})
		}
		close(gate)
		wg.Wait()
		l.logf("bulk-flood: round %d of %d done: %s", round+1, o.bulkFloodRounds, res.answersText())
	}
	res.phaseTime, res.cpu = time.Since(start), l.since(cpuStart)
	res.rssPeak, _ = sampler()
	res.latency = summarize(res.latencies)
	return res
}

// postBulk posts a bulk and reads its answer, named by its status and
// code ("400 invalid_bulk"; "" when none arrived); an answer other than
// 400 invalid_bulk or 429 too_many_requests with Retry-After is an error
// too.
func (c *client) postBulk(ctx context.Context, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/decisions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("POST /api/decisions: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("POST /api/decisions: read the answer: %w", err)
	}
	var answer struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &answer)
	key := fmt.Sprintf("%d %s", resp.StatusCode, answer.Error.Code)
	switch key {
	case "400 invalid_bulk":
		return key, nil
	case "429 too_many_requests":
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || secs < 1 {
			return key, fmt.Errorf("answered 429 with Retry-After %q, not a number of seconds", resp.Header.Get("Retry-After"))
		}
		return key, nil
	}
	return key, errors.New("answered " + resp.Status + ", not 400 invalid_bulk or 429: " + string(b[:min(len(b), 300)]))
}

// rows are the phase's lines of the table.
func (r *bulkFloodResult) rows() []row {
	flood := fmt.Sprintf("%d bulks of 1 MiB from one user at once, %s", r.n, roundsText(r.rounds))
	const rssTarget = "peak − before ≤ 200 MiB"
	var rows []row
	switch {
	case r.rssBefore < 0 || r.rssPeak < 0:
		rows = append(rows, row{"server RSS, " + flood, "not measured", rssTarget, "—"})
	default:
		rows = append(rows, row{"server RSS before → at peak, " + flood,
			fmt.Sprintf("%s → %s (+%s)", fmtBytes(r.rssBefore), fmtBytes(r.rssPeak), fmtBytes(max(r.rssPeak-r.rssBefore, 0))),
			rssTarget, verdict(r.rssPeak-r.rssBefore <= targetBulkFloodRSSGrowth)})
	}
	rows = append(rows, row{"bulk answers", fmt.Sprintf("%s (%s posted)", r.answersText(), fmtInt(r.posted)) + failureNote(r.failures, r.firstErr),
		"400 invalid_bulk, or 429 with Retry-After", verdict(r.posted > 0 && r.failures == 0)})
	if r.latency.n > 0 {
		rows = append(rows, row{"bulk answer p50 / p99 (max)",
			fmt.Sprintf("%s / %s (%s), %s answers", fmtDur(r.latency.p50), fmtDur(r.latency.p99), fmtDur(r.latency.max), fmtInt(r.latency.n)),
			"—", "—"})
	}
	return rows
}

// answersText writes the answers by status and code, in order:
// "400 invalid_bulk: 32, 429 too_many_requests: 88".
func (r *bulkFloodResult) answersText() string {
	failMu.Lock()
	defer failMu.Unlock()
	keys := slices.Sorted(maps.Keys(r.answers))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %s", k, fmtInt(r.answers[k]))
	}
	return strings.Join(parts, ", ")
}

// line is the phase's line under the table.
func (r *bulkFloodResult) line() string {
	return fmt.Sprintf("- bulk-flood: %s of %d bulks of 1 MiB at once, %s posted in %s; answer max %s%s\n",
		roundsText(r.rounds), r.n, fmtInt(r.posted), fmtDur(r.phaseTime), fmtDur(r.latency.max),
		cpuNote(r.cpu, r.posted, "bulk")+failureNote(r.failures, r.firstErr))
}

// roundsText is "1 round" or "n rounds".
func roundsText(n int) string {
	if n == 1 {
		return "1 round"
	}
	return fmt.Sprintf("%d rounds", n)
}
