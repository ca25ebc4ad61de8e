package openai

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testKey is the key every fake expects; no error may contain it.
const testKey = "sk-test-TURNSTILE-0123456789abcdef"

// reply answers one request of a fake endpoint.
type reply func(t *testing.T, w http.ResponseWriter, r *http.Request)

// fake is an OpenAI-compatible endpoint that answers its requests with
// replies in order (the last one repeats) and keeps what it was sent.
type fake struct {
	t       *testing.T
	srv     *httptest.Server
	replies []reply

	mu     sync.Mutex
	bodies []map[string]any
	auth   []string
}

func newFake(t *testing.T, replies ...reply) *fake {
	t.Helper()
	f := &fake{t: t, replies: replies}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		f.t.Errorf("request %s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
		http.NotFound(w, r)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		f.t.Errorf("request body: %v", err)
	}
	f.mu.Lock()
	n := len(f.bodies)
	f.bodies = append(f.bodies, body)
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	f.mu.Unlock()
	f.replies[min(n, len(f.replies)-1)](f.t, w, r)
}

// requests is how many requests the fake has seen.
func (f *fake) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

// authorization is the Authorization header of request i.
func (f *fake) authorization(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.auth[i]
}

// body is the decoded JSON body of request i.
func (f *fake) body(i int) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.bodies[i]
}

// provider returns a provider for the fake with a short backoff; opts may
// change the defaults.
func (f *fake) provider(t *testing.T, opts ...func(*Options)) *Provider {
	t.Helper()
	o := Options{APIKey: testKey, BaseURL: f.srv.URL + "/v1", Model: "gpt-4o-mini", MaxRetryDelay: 5 * time.Millisecond}
	for _, fn := range opts {
		fn(&o)
	}
	p, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// events splits a recorded stream into its events, each with its blank line.
func events(b []byte) []string {
	var out []string
	for _, e := range strings.SplitAfter(string(b), "\n\n") {
		if e != "" {
			out = append(out, e)
		}
	}
	return out
}

func streamHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Request-Id", "req_5f0c3e8a9b1d4e2f")
	w.WriteHeader(http.StatusOK)
}

// replay sends a recorded stream one event per write, flushing each, as a
// real endpoint does.
func replay(name string) reply {
	return func(t *testing.T, w http.ResponseWriter, r *http.Request) {
		streamHeaders(w)
		rc := http.NewResponseController(w)
		for _, e := range events(fixture(t, name)) {
			if _, err := w.Write([]byte(e)); err != nil {
				return
			}
			_ = rc.Flush()
		}
	}
}

// hangUp sends a recorded stream and then drops the connection without
// ending the chunked body, as a crashing server or a reset does.
func hangUp(name string) reply {
	return func(t *testing.T, w http.ResponseWriter, r *http.Request) {
		replay(name)(t, w, r)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	}
}

// status answers with an HTTP error and a recorded JSON error body.
func status(code int, name string, headers ...string) reply {
	return func(t *testing.T, w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = w.Write(fixture(t, name))
	}
}

// stall holds the request until the client gives up; it first sends the
// first n events of the recorded stream, or nothing, not even headers, when
// n is 0.
func stall(name string, n int) reply {
	return func(t *testing.T, w http.ResponseWriter, r *http.Request) {
		if n > 0 {
			streamHeaders(w)
			for _, e := range events(fixture(t, name))[:n] {
				_, _ = w.Write([]byte(e))
			}
			_ = http.NewResponseController(w).Flush()
		}
		<-r.Context().Done()
	}
}
