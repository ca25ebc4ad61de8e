package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// client speaks the server's JSON API with a bearer token, over a
// transport that opens as many connections as there are requests in flight
// and keeps them for the next phase.
type client struct {
	http  *http.Client
	base  string
	token string
}

func newClient(base *url.URL, token string, maxConns int) *client {
	tr := &http.Transport{
		Proxy:               nil, // the server is local: never through a proxy from the environment
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxConnsPerHost:     0,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &client{http: &http.Client{Transport: tr}, base: base.String(), token: token}
}

func (c *client) close() { c.http.CloseIdleConnections() }

// decide posts an approval of a run's pending turn: streamed (Accept:
// application/x-ndjson) or as one JSON answer.
func (c *client) decide(ctx context.Context, r waitingRun, streamed bool) (*http.Response, error) {
	body := fmt.Sprintf(`{"turn_digest":%q,"decision":"approve","scope":"once","reason":"load test"}`, r.digest)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/runs/%d/decisions", c.base, r.id),
		strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	if streamed {
		req.Header.Set("Accept", "application/x-ndjson")
	} else {
		req.Header.Set("Accept", "application/json")
	}
	return c.http.Do(req)
}

// decideInbox posts an approval as the inbox's script does: the decision
// form, with the session's cookie and CSRF token, asking for the stream
// of counts (Accept: application/x-ndjson).
func (c *client) decideInbox(ctx context.Context, r waitingRun, s inboxSession) (*http.Response, error) {
	form := url.Values{"csrf_token": {s.csrf}, "turn_digest": {r.digest}, "decision": {"approve"},
		"scope": {"once"}, "reason": {"load test"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/inbox/runs/%d/decision", c.base, r.id),
		strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/x-ndjson")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: s.cookie})
	return c.http.Do(req)
}

// startRun starts a run through POST /api/runs; it must come back waiting
// for approval.
func (c *client) startRun(ctx context.Context, configuration, prompt string) (waitingRun, error) {
	body, _ := json.Marshal(map[string]any{"configuration": configuration, "prompt": prompt})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/runs", bytes.NewReader(body))
	if err != nil {
		return waitingRun{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return waitingRun{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return waitingRun{}, fmt.Errorf("POST /api/runs: %s", answerError(resp))
	}
	var out struct {
		Run struct {
			ID         int64  `json:"id"`
			Status     string `json:"status"`
			TurnDigest string `json:"turn_digest"`
		} `json:"run"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return waitingRun{}, fmt.Errorf("POST /api/runs: read answer: %w", err)
	}
	if out.Run.Status != "waiting_for_approval" {
		return waitingRun{}, fmt.Errorf("POST /api/runs: run %d is %s, not waiting_for_approval: is %q a load configuration (--print-config)?",
			out.Run.ID, out.Run.Status, configuration)
	}
	return waitingRun{id: out.Run.ID, digest: out.Run.TurnDigest}, nil
}

// get fetches a path and drains the answer; it warms connections up and
// checks that the server answers.
func (c *client) get(ctx context.Context, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// openStream GETs an NDJSON route with the bearer token and returns the
// body of its 200; any other answer is an error that names it.
func (c *client) openStream(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", path, answerError(resp))
	}
	return resp.Body, nil
}

// answerError describes a refused answer: its status and the start of its
// body, which is where the server says why.
func answerError(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	return fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
}

// maxLine bounds one NDJSON line.
const maxLine = 1 << 20

// readLines calls fn with every NDJSON line of r and the moment it was
// read, until the body ends or fn returns false. A body that ends without
// a newline still yields its last line.
func readLines(r io.Reader, fn func(line []byte, at time.Time) bool) error {
	br := bufio.NewReaderSize(r, 4096)
	var long []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, chunk...)
			if len(long) > maxLine {
				return fmt.Errorf("a line longer than %d bytes", maxLine)
			}
			continue
		}
		line := chunk
		if long != nil {
			line = append(long, chunk...)
			long = nil
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if !fn(line, time.Now()) {
				return nil
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Line kinds of a decision's stream.
const (
	lineStep      = "step"
	lineKeepalive = "keepalive"
)

// lineEvent is what a stream line is: "step", "keepalive", or a terminal
// line ("done", "awaiting_approval", "error", …, or the inbox's
// "settled"). Every line names its kind in "type"; the inbox's step lines
// are "progress".
func lineEvent(line []byte) string {
	// Keepalives are most of the lines of a held stream: spare them the
	// decoder.
	if bytes.Equal(line, []byte(`{"type":"keepalive"}`)) {
		return lineKeepalive
	}
	var v struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(line, &v); err != nil {
		return "unreadable"
	}
	switch v.Type {
	case "progress":
		return lineStep
	case "":
		return "unknown"
	}
	return v.Type
}
