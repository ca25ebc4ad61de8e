package testrig

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"
)

// OpenAIMock is an OpenAI-compatible endpoint (POST /v1/chat/completions,
// streamed) that answers every request with Chunks pieces of text, one
// every Every, each flushed at once, and remembers when it sent each: a
// piece is a marker unique across requests ("q3c017 "), which Markers
// finds again in what a reader received.
type OpenAIMock struct {
	URL    string // up to and including /v1
	Chunks int
	Every  time.Duration
	// Thinking is how many of the first pieces go as reasoning_content,
	// as a reasoning model's thinking, instead of content.
	Thinking int

	mu       sync.Mutex
	requests int
	sent     map[string]time.Time
}

// NewOpenAIMock starts a mock endpoint, closed when the test ends.
func NewOpenAIMock(t testing.TB, chunks int, every time.Duration) *OpenAIMock {
	t.Helper()
	m := &OpenAIMock{Chunks: chunks, Every: every, sent: map[string]time.Time{}}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	m.URL = srv.URL + "/v1"
	return m
}

func (m *OpenAIMock) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.NotFound(w, r)
		return
	}
	m.mu.Lock()
	m.requests++
	q := m.requests
	m.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(delta map[string]any, finish any) bool {
		b, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("chatcmpl-%d", q), "object": "chat.completion.chunk",
			"created": 1731456789, "model": "mock", "choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(map[string]any{"role": "assistant", "content": ""}, nil) {
		return
	}
	next := time.Now()
	for i := 1; i <= m.Chunks; i++ {
		next = next.Add(m.Every)
		select {
		case <-time.After(time.Until(next)):
		case <-r.Context().Done():
			return
		}
		marker := fmt.Sprintf("q%dc%03d ", q, i)
		delta := map[string]any{"content": marker}
		if i <= m.Thinking {
			delta = map[string]any{"content": nil, "reasoning_content": marker}
		}
		if !send(delta, nil) {
			return
		}
		m.mu.Lock()
		m.sent[marker] = time.Now()
		m.mu.Unlock()
	}
	if send(map[string]any{"content": ""}, "stop") {
		fmt.Fprint(w, "data: [DONE]\n\n")
		_ = rc.Flush()
	}
}

// Sent is when the piece with this marker was flushed; false for one never
// sent.
func (m *OpenAIMock) Sent(marker string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.sent[marker]
	return at, ok
}

var mockMarker = regexp.MustCompile(`q[0-9]+c[0-9]{3} `)

// Markers are the mock's pieces in a text, in order.
func Markers(text string) []string { return mockMarker.FindAllString(text, -1) }
