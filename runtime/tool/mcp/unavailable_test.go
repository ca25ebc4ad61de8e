package mcp_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp"
)

// closedURL returns an MCP URL on a loopback port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/mcp"
}

// refusing answers every request with the status.
func refusing(t *testing.T, status int) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, http.StatusText(status), status)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// hanging is a server that reads requests and never answers them.
type hanging struct {
	url      string
	requests atomic.Int32
}

func newHanging(t *testing.T) *hanging {
	t.Helper()
	h := &hanging{}
	stop := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.requests.Add(1)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	// Cleanups run last first: the handlers return before Close waits
	// for them.
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(stop) })
	h.url = ts.URL
	return h
}

// unavailable requires err to hold exactly one *runtime.UnavailableError,
// for the server, and returns it.
func unavailable(t *testing.T, err error, server string) *runtime.UnavailableError {
	t.Helper()
	var ue *runtime.UnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("error = %v, want a *runtime.UnavailableError", err)
	}
	if ue.Source != "mcp server "+server || ue.Prefix != server+"__" {
		t.Errorf("UnavailableError = %+v, want source %q and prefix %q", ue, "mcp server "+server, server+"__")
	}
	return ue
}

func TestToolsUnavailableCauses(t *testing.T) {
	down := closedURL(t)
	env := map[string]string{"MCP_PATH_KEY": "p4th-s3cret", "MCP_QUERY_KEY": "qu3ry-s3cret", "MCP_TOKEN": token}
	getenv := func(name string) string { return env[name] }
	tests := []struct {
		name string
		srv  runtime.MCPServer
		want string
	}{
		{"connection refused", runtime.MCPServer{Name: "down", URL: down},
			"cannot connect to " + down + ": connection refused"},
		{"401", runtime.MCPServer{Name: "locked", URL: refusing(t, http.StatusUnauthorized),
			Headers: map[string]string{"Authorization": "Bearer ${MCP_TOKEN}"}},
			"the server refused the credentials (HTTP 401)"},
		{"403", runtime.MCPServer{Name: "locked", URL: refusing(t, http.StatusForbidden)},
			"the server refused the credentials (HTTP 403)"},
		{"500", runtime.MCPServer{Name: "broken", URL: refusing(t, http.StatusInternalServerError) + "/mcp"},
			"/mcp: the server answered HTTP 500 Internal Server Error"},
		{"unset variable", runtime.MCPServer{Name: "billing", URL: down,
			Headers: map[string]string{"Authorization": "Bearer ${BILLING_TOKEN}"}},
			"environment variable BILLING_TOKEN is unset"},
		{"unset variables", runtime.MCPServer{Name: "billing", URL: "${BILLING_URL}",
			Headers: map[string]string{"Authorization": "Bearer ${BILLING_TOKEN}", "X-Again": "${BILLING_TOKEN}"}},
			"environment variables BILLING_TOKEN and BILLING_URL are unset"},
		// The values of the variables never show; what was in the query
		// is left out altogether.
		{"secrets in the url", runtime.MCPServer{Name: "down", URL: down + "/${MCP_PATH_KEY}?key=${MCP_QUERY_KEY}"},
			"cannot connect to " + down + "/${MCP_PATH_KEY}: connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := mcp.NewSource(mcp.Options{Getenv: getenv, ConnectTimeout: 5 * time.Second})
			t.Cleanup(func() { src.Close() })
			_, err := src.Tools(context.Background(), &runtime.Configuration{MCPServers: []runtime.MCPServer{tt.srv}})
			ue := unavailable(t, err, tt.srv.Name)
			if !strings.HasSuffix(ue.Cause, tt.want) {
				t.Errorf("cause = %q, want it to end %q", ue.Cause, tt.want)
			}
			for _, v := range env {
				if strings.Contains(err.Error(), v) {
					t.Errorf("error %q holds the value of a variable", err)
				}
			}
		})
	}
}

// TestToolsJoinsOneErrorPerServer: each failed server is one
// UnavailableError of the joined error, and the others' tools come back.
func TestToolsJoinsOneErrorPerServer(t *testing.T) {
	url := many(t, 1)
	src := mcp.NewSource(mcp.Options{Getenv: func(string) string { return "" }})
	t.Cleanup(func() { src.Close() })
	cfg := &runtime.Configuration{MCPServers: []runtime.MCPServer{
		{Name: "down", URL: closedURL(t)},
		{Name: "open", URL: url},
		{Name: "billing", URL: url, Headers: map[string]string{"Authorization": "Bearer ${BILLING_TOKEN}"}},
	}}
	tools, err := src.Tools(context.Background(), cfg)
	if len(tools) != 1 || tools[0].Spec().Name != "open__t0" {
		t.Errorf("tools = %d, want open's one", len(tools))
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error = %#v, want errors joined", err)
	}
	var got []string
	for _, e := range joined.Unwrap() {
		var ue *runtime.UnavailableError
		if !errors.As(e, &ue) {
			t.Fatalf("joined error %v is not an UnavailableError", e)
		}
		got = append(got, ue.Prefix)
	}
	if strings.Join(got, " ") != "down__ billing__" {
		t.Errorf("unavailable prefixes = %q, want down__ and billing__", got)
	}
}

// TestFailedConnectionIsRemembered: a server that never answers costs the
// first Tools the connect timeout; the next one, within RetryAfter, gets
// the remembered cause at once without a request; after RetryAfter the
// server is tried again.
func TestFailedConnectionIsRemembered(t *testing.T) {
	h := newHanging(t)
	const connect = 200 * time.Millisecond
	src := mcp.NewSource(mcp.Options{ConnectTimeout: connect, RetryAfter: 700 * time.Millisecond})
	t.Cleanup(func() { src.Close() })
	cfg := &runtime.Configuration{MCPServers: []runtime.MCPServer{{Name: "slow", URL: h.url}}}

	start := time.Now()
	_, err := src.Tools(context.Background(), cfg)
	if took := time.Since(start); took < connect {
		t.Errorf("the first Tools took %s, less than the connect timeout", took)
	}
	first := unavailable(t, err, "slow").Cause
	if want := "cannot connect to " + h.url + ": no answer within 200ms"; first != want {
		t.Errorf("first cause = %q, want %q", first, want)
	}
	requests := h.requests.Load()

	start = time.Now()
	_, err = src.Tools(context.Background(), cfg)
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Errorf("the second Tools took %s, want the remembered failure at once", took)
	}
	second := unavailable(t, err, "slow").Cause
	if !strings.HasPrefix(second, "not tried again until ") || !strings.HasSuffix(second, ": "+first) {
		t.Errorf("second cause = %q, want \"not tried again until …: %s\"", second, first)
	}
	if got := h.requests.Load(); got != requests {
		t.Errorf("the server saw %d requests after the second Tools, want still %d", got, requests)
	}

	time.Sleep(time.Until(start.Add(700 * time.Millisecond)))
	_, err = src.Tools(context.Background(), cfg)
	if cause := unavailable(t, err, "slow").Cause; cause != first {
		t.Errorf("cause after RetryAfter = %q, want a new attempt's %q", cause, first)
	}
	if got := h.requests.Load(); got <= requests {
		t.Errorf("the server saw no request after RetryAfter")
	}
}

// TestCallersShareOneConnectionAttempt: runs that ask for a server while a
// connection attempt runs wait for that attempt rather than making their
// own, and one whose context ends first stops waiting at once.
func TestCallersShareOneConnectionAttempt(t *testing.T) {
	h := newHanging(t)
	const connect = 400 * time.Millisecond
	src := mcp.NewSource(mcp.Options{ConnectTimeout: connect})
	t.Cleanup(func() { src.Close() })
	cfg := &runtime.Configuration{MCPServers: []runtime.MCPServer{{Name: "slow", URL: h.url}}}

	start := time.Now()
	var wg sync.WaitGroup
	causes := make([]string, 4)
	for i := range causes {
		wg.Go(func() {
			_, err := src.Tools(context.Background(), cfg)
			causes[i] = unavailable(t, err, "slow").Cause
		})
	}
	// One more, with little patience, comes while the attempt runs: once
	// the server has its request (a busy machine may start the four late).
	for deadline := time.Now().Add(5 * time.Second); h.requests.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the server saw no connection attempt within 5s")
		}
		time.Sleep(5 * time.Millisecond) // a poll of the server's count
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	impatient := time.Now()
	_, err := src.Tools(ctx, cfg)
	if took := time.Since(impatient); took > 250*time.Millisecond {
		t.Errorf("a caller with a 50ms deadline waited %s for another's connection attempt", took)
	}
	if cause := unavailable(t, err, "slow").Cause; !strings.Contains(cause, "context deadline exceeded") {
		t.Errorf("the impatient caller's cause = %q, want its own deadline", cause)
	}
	wg.Wait()
	if took := time.Since(start); took > connect+300*time.Millisecond {
		t.Errorf("four callers took %s with a connect timeout of %s", took, connect)
	}
	for i, c := range causes {
		if c != causes[0] || !strings.HasSuffix(c, "no answer within 400ms") {
			t.Errorf("caller %d: cause %q, want the one attempt's", i, c)
		}
	}
	if got := h.requests.Load(); got != 1 {
		t.Errorf("the server saw %d requests, want the one of a single attempt", got)
	}
}

func TestMissingVariables(t *testing.T) {
	srv := runtime.MCPServer{URL: "https://${HOST}/mcp?k=${KEY}", Headers: map[string]string{
		"Authorization": "Bearer ${TOKEN}", "X-Key": "${KEY}", "X-Fixed": "plain"}}
	env := map[string]string{"HOST": "example.com"}
	got := mcp.MissingVariables(srv, func(n string) string { return env[n] })
	if strings.Join(got, " ") != "KEY TOKEN" {
		t.Errorf("MissingVariables = %q, want KEY and TOKEN", got)
	}
}

// TestCheckListsAMetaToolServer: Check reaches a meta_tool server, which
// Tools does not, and reports one that is down as Tools would.
func TestCheckListsAMetaToolServer(t *testing.T) {
	src := mcp.NewSource(mcp.Options{})
	t.Cleanup(func() { src.Close() })
	n, err := src.Check(context.Background(), runtime.MCPServer{Name: "meta", URL: many(t, 3), MetaTool: true})
	if err != nil || n != 3 {
		t.Errorf("Check = %d, %v; want the server's 3 tools", n, err)
	}
	_, err = src.Check(context.Background(), runtime.MCPServer{Name: "meta", URL: closedURL(t), MetaTool: true})
	if cause := unavailable(t, err, "meta").Cause; !strings.HasSuffix(cause, "connection refused") {
		t.Errorf("Check of a closed port: cause %q, want connection refused", cause)
	}
}
