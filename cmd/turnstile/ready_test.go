package main

import (
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/store/dbtest"
)

var readyPattern = regexp.MustCompile(`(?m)^Turnstile is ready: open (http://\S+/)$`)

// waitReadyLine waits until the child prints the line that says where to
// open it, and returns the URL.
func waitReadyLine(t *testing.T, s *server, within time.Duration) string {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := readyPattern.FindStringSubmatch(s.stdout.String()); m != nil {
			return m[1]
		}
		select {
		case <-s.done:
			t.Fatalf("turnstile serve exited (%v) without saying it is ready; stdout %q, stderr:\n%s", s.waitErr, s.stdout, s.stderr)
		default:
		}
	}
	t.Fatalf("no ready line within %s; stdout %q, stderr:\n%s", within, s.stdout, s.stderr)
	return ""
}

// TestServePrintsTheURLToOpen: serve says on stdout where to open it, with
// the address it really listens on (--addr 127.0.0.1:0 picks a port), once
// that address answers, and after the demo's passwords, which keep their
// format.
func TestServePrintsTheURLToOpen(t *testing.T) {
	_, dsn := dbtest.New(t)
	s := startChild(t, childEnv(), "serve", "--addr", "127.0.0.1:0", "--dsn", dsn, "--demo")
	url := waitReadyLine(t, s, 30*time.Second)
	if strings.HasSuffix(url, ":0/") {
		t.Fatalf("ready line names %s, want the port the listener got", url)
	}
	// No retry: the address answers as soon as the line is out.
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url + "healthz")
	if err != nil {
		t.Fatalf("GET %shealthz right after the ready line: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %shealthz = %d, want 200", url, resp.StatusCode)
	}
	out := s.stdout.String()
	if n := len(passwordPattern.FindAllStringSubmatch(out, -1)); n != 3 {
		t.Errorf("%d demo passwords in stdout, want 3:\n%s", n, out)
	}
	if strings.Index(out, "demo: 4 runs are waiting") > strings.Index(out, "Turnstile is ready") {
		t.Errorf("the ready line comes before the demo's lines:\n%s", out)
	}
	s.stop(t)
}

func TestOpenURL(t *testing.T) {
	for _, tt := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "http://127.0.0.1:8080/"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, "http://127.0.0.1:8080/"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 9000}, "http://127.0.0.1:9000/"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 9000}, "http://[::1]:9000/"},
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.7"), Port: 80}, "http://192.0.2.7:80/"},
	} {
		if got := openURL(tt.addr); got != tt.want {
			t.Errorf("openURL(%s) = %s, want %s", tt.addr, got, tt.want)
		}
	}
}

// TestServeAccessLog: by default serve logs one JSON line per request with
// its request id (the incoming X-Request-Id, sent back), the path without
// the query string, the status and the peer; --access-log=false (here
// TURNSTILE_ACCESS_LOG=false) logs none and sends no id.
func TestServeAccessLog(t *testing.T) {
	_, dsn := dbtest.New(t)
	secret := planted("query-token")
	get := func(t *testing.T, addr string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/login?token="+secret, nil)
		req.Header.Set("X-Request-Id", "readme-tour-1")
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	addr := freeAddr(t)
	s := startServer(t, addr, childEnv(), "--addr", addr, "--dsn", dsn)
	if resp := get(t, addr); resp.Header.Get("X-Request-Id") != "readme-tour-1" {
		t.Errorf("X-Request-Id = %q, want the incoming readme-tour-1", resp.Header.Get("X-Request-Id"))
	}
	s.stop(t)
	lines := s.logLines(t)
	if !logged(lines, "request", map[string]any{"level": "INFO", "method": "GET", "path": "/login",
		"status": float64(http.StatusOK), "request_id": "readme-tour-1"}) {
		t.Errorf("no access line for GET /login with its request id in stderr:\n%s", s.stderr)
	}
	if !logged(lines, "request", map[string]any{"path": "/readyz"}) {
		t.Errorf("no access line for startServer's GET /readyz in stderr:\n%s", s.stderr)
	}
	if strings.Contains(s.stderr.String(), secret) {
		t.Errorf("the log holds the query string's or the header's secret:\n%s", s.stderr)
	}
	for _, l := range lines {
		if l["msg"] == "request" && (l["remote_addr"] == nil || l["duration_ms"] == nil || l["bytes"] == nil) {
			t.Errorf("access line without remote_addr, duration_ms or bytes: %v", l)
		}
	}

	addr = freeAddr(t)
	s = startServer(t, addr, childEnv("TURNSTILE_ACCESS_LOG=false"), "--addr", addr, "--dsn", dsn)
	if resp := get(t, addr); resp.Header.Get("X-Request-Id") != "" {
		t.Errorf("with the access log off, X-Request-Id = %q, want none", resp.Header.Get("X-Request-Id"))
	}
	s.stop(t)
	if logged(s.logLines(t), "request", nil) {
		t.Errorf("TURNSTILE_ACCESS_LOG=false still logged requests:\n%s", s.stderr)
	}
}
