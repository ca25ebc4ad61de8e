package web

import (
	"bufio"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"log/slog"
)

// logLines collects JSON log lines written from the server's goroutines.
type logLines struct {
	mu    sync.Mutex
	lines []string
	added chan struct{}
}

func newLogLines() *logLines { return &logLines{added: make(chan struct{}, 100)} }

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.lines = append(l.lines, string(p))
	l.mu.Unlock()
	l.added <- struct{}{}
	return len(p), nil
}

// next waits for the next line and returns it decoded, with its text.
func (l *logLines) next(t *testing.T) (map[string]any, string) {
	t.Helper()
	select {
	case <-l.added:
	case <-time.After(5 * time.Second):
		t.Fatal("no access log line within 5s")
	}
	l.mu.Lock()
	text := l.lines[len(l.lines)-1]
	l.mu.Unlock()
	var rec map[string]any
	if err := json.Unmarshal([]byte(text), &rec); err != nil {
		t.Fatalf("log line %q is not JSON: %v", text, err)
	}
	return rec, text
}

func accessLogged(t *testing.T, h http.Handler) (*httptest.Server, *logLines) {
	t.Helper()
	lines := newLogLines()
	srv := httptest.NewServer(AccessLog(slog.New(slog.NewJSONHandler(lines, nil)), h))
	t.Cleanup(srv.Close)
	return srv, lines
}

var hexID = regexp.MustCompile(`^[0-9a-f]{16}$`)

// TestAccessLogStreamsThroughAndLogsAtTheEnd: a handler behind AccessLog
// flushes and sets write deadlines through http.ResponseController without
// an error, its first line reaches the client while it still runs, and the
// one line logged when it returns has every field and neither the query
// string nor any header.
func TestAccessLogStreamsThroughAndLogsAtTheEnd(t *testing.T) {
	read := make(chan struct{})
	var rcErr error
	srv, lines := accessLogged(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"type":"progress"}` + "\n"))
		rcErr = errors.Join(rc.SetWriteDeadline(time.Now().Add(10*time.Second)), rc.Flush())
		select {
		case <-read: // the client has the line: nothing held it back
		case <-time.After(5 * time.Second):
		}
		w.Write([]byte(`{"type":"settled"}` + "\n"))
	}))

	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/runs/7/events?token=tst_query_secret", nil)
	req.Header.Set("Authorization", "Bearer header-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	id := resp.Header.Get("X-Request-Id")
	if !hexID.MatchString(id) {
		t.Errorf("X-Request-Id = %q, want 16 hex digits", id)
	}
	br := bufio.NewReader(resp.Body)
	var first string
	got := make(chan error, 1)
	go func() {
		var err error
		first, err = br.ReadString('\n')
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil || first != `{"type":"progress"}`+"\n" {
			t.Fatalf("first line = %q, %v", first, err)
		}
		select {
		case <-lines.added:
			t.Error("the handler had returned before the client got the first line: the flush did not go through AccessLog")
		default:
		}
		close(read)
	case <-time.After(2 * time.Second):
		t.Error("the first line did not reach the client while the handler ran: the flush did not go through AccessLog")
		close(read)
		<-got
	}
	rest, _ := br.ReadString('\n')
	if rest != `{"type":"settled"}`+"\n" {
		t.Errorf("second line = %q", rest)
	}

	rec, text := lines.next(t)
	if rcErr != nil {
		t.Errorf("http.ResponseController through AccessLog: %v", rcErr)
	}
	want := map[string]any{"msg": "request", "level": "INFO", "method": "GET", "path": "/api/runs/7/events",
		"status": float64(http.StatusAccepted), "bytes": float64(len(first) + len(rest)), "request_id": id}
	for k, v := range want {
		if rec[k] != v {
			t.Errorf("%s = %v, want %v in %s", k, rec[k], v, text)
		}
	}
	if d, ok := rec["duration_ms"].(float64); !ok || d <= 0 {
		t.Errorf("duration_ms = %v, want a positive number in %s", rec["duration_ms"], text)
	}
	if a, ok := rec["remote_addr"].(string); !ok || !strings.HasPrefix(a, "127.0.0.1:") {
		t.Errorf("remote_addr = %v, want the peer's 127.0.0.1:port in %s", rec["remote_addr"], text)
	}
	for _, secret := range []string{"tst_query_secret", "token=", "header-secret", "Authorization"} {
		if strings.Contains(text, secret) {
			t.Errorf("the access line holds %q: %s", secret, text)
		}
	}
}

// TestAccessLogRequestID: a sane incoming X-Request-Id is kept and sent
// back; anything else is replaced by a fresh id, different per request.
func TestAccessLogRequestID(t *testing.T) {
	srv, lines := accessLogged(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	tests := []struct {
		name, incoming string
		kept           bool
	}{
		{"none", "", false},
		{"nginx request id", "0f3c9a1b2d4e5f60718293a4b5c6d7e8", true},
		{"uuid", "6ba7b810-9dad-11d1-80b4-00c04fd430c8", true},
		{"spaces", "a b", false},
		{"a forged log line", `x","level":"ERROR`, false},
		{"too long", strings.Repeat("a", 65), false},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/healthz", nil)
			if tt.incoming != "" {
				req.Header.Set("X-Request-Id", tt.incoming)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := resp.Header.Get("X-Request-Id")
			rec, text := lines.next(t)
			switch {
			case tt.kept && got != tt.incoming:
				t.Errorf("X-Request-Id = %q, want the incoming %q", got, tt.incoming)
			case !tt.kept && !hexID.MatchString(got):
				t.Errorf("X-Request-Id = %q, want a fresh 16-hex id for %q", got, tt.incoming)
			case seen[got]:
				t.Errorf("X-Request-Id %q given twice", got)
			}
			seen[got] = true
			if rec["request_id"] != got {
				t.Errorf("request_id = %v, want the header's %q", rec["request_id"], got)
			}
			if rec["status"] != float64(http.StatusOK) || rec["bytes"] != float64(0) {
				t.Errorf("a handler that writes nothing logged status %v, bytes %v; want 200, 0: %s", rec["status"], rec["bytes"], text)
			}
		})
	}
}

// TestAccessLogAbortedHandler: a handler that panics with
// http.ErrAbortHandler (how a stream is cut) still gets its line.
func TestAccessLogAbortedHandler(t *testing.T) {
	srv, lines := accessLogged(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.Write([]byte("partial\n"))
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}))
	resp, err := http.Get(srv.URL + "/inbox/runs/3/decision")
	if err == nil {
		resp.Body.Close()
	}
	rec, text := lines.next(t)
	if rec["aborted"] != true || rec["status"] != float64(http.StatusOK) || rec["bytes"] != float64(len("partial\n")) {
		t.Errorf("aborted request logged %s; want aborted, status 200, 8 bytes", text)
	}
}
