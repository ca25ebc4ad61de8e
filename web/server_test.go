package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alexedwards/scs/v2"
)

// readiness is a Readiness whose answer the test chooses.
type readiness func(ctx context.Context) error

func (r readiness) Ready(ctx context.Context) error { return r(ctx) }

// Secrets a response must never show: the database error and the panic value.
const (
	dbSecret    = "dial tcp 10.0.0.7:3306: access denied for user 'turnstile'@'%' (password: hunter2)"
	panicSecret = "panic: runtime secret 0xdeadbeef"
)

// newHandler is the whole router with a logger that discards and the
// readiness the test chooses.
func newHandler(t *testing.T, ready Readiness) http.Handler {
	t.Helper()
	return New(Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Ready: ready, Sessions: scs.New()}).Handler()
}

func TestRoutes(t *testing.T) {
	ready := readiness(func(context.Context) error { return nil })
	notReady := readiness(func(context.Context) error { return errors.New(dbSecret) })
	panics := readiness(func(context.Context) error { panic(panicSecret) })

	tests := []struct {
		name            string
		ready           Readiness
		method          string
		path            string
		wantStatus      int
		wantStatusField string // the body's "status", for a 2xx
		wantCode        string // the body's error code, for a non-2xx
		wantAllow       string
		wantPage        bool // an HTML error page rather than JSON
		notInBody       []string
	}{
		{name: "healthz", ready: notReady, method: http.MethodGet, path: "/healthz",
			wantStatus: http.StatusOK, wantStatusField: "ok"},
		{name: "readyz when ready", ready: ready, method: http.MethodGet, path: "/readyz",
			wantStatus: http.StatusOK, wantStatusField: "ready"},
		{name: "readyz when the database fails", ready: notReady, method: http.MethodGet, path: "/readyz",
			wantStatus: http.StatusServiceUnavailable, wantCode: "not_ready", notInBody: []string{dbSecret, "hunter2", "10.0.0.7", "access denied"}},
		{name: "unknown path", ready: ready, method: http.MethodGet, path: "/no/such/page",
			wantStatus: http.StatusNotFound, wantPage: true},
		{name: "wrong method", ready: ready, method: http.MethodPost, path: "/healthz",
			wantStatus: http.StatusMethodNotAllowed, wantPage: true, wantAllow: "GET"},
		{name: "panic", ready: panics, method: http.MethodGet, path: "/readyz",
			wantStatus: http.StatusInternalServerError, wantPage: true, notInBody: []string{panicSecret, "deadbeef"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			newHandler(t, tt.ready).ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))

			if rec.Code != tt.wantStatus {
				t.Errorf("%s %s status = %d, want %d; body %s", tt.method, tt.path, rec.Code, tt.wantStatus, rec.Body)
			}
			body := rec.Body.String()
			for _, secret := range tt.notInBody {
				if strings.Contains(body, secret) {
					t.Errorf("body = %s, shows %q to the client", body, secret)
				}
			}
			if tt.wantAllow != "" && !strings.Contains(rec.Header().Get("Allow"), tt.wantAllow) {
				t.Errorf("Allow = %q, want it to contain %s", rec.Header().Get("Allow"), tt.wantAllow)
			}
			if tt.wantPage {
				if got := rec.Header().Get("Content-Type"); !strings.HasPrefix(got, "text/html") || !strings.Contains(body, "</html>") {
					t.Errorf("Content-Type = %q, body %q; want an HTML error page", got, body)
				}
				return
			}
			if got := rec.Header().Get("Content-Type"); !strings.HasPrefix(got, "application/json") {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
			var got struct {
				Status string `json:"status"`
				Error  *struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("body %q is not JSON: %v", body, err)
			}
			if tt.wantCode == "" {
				if got.Status != tt.wantStatusField || got.Error != nil {
					t.Errorf("body = %s, want status %q and no error", body, tt.wantStatusField)
				}
			} else {
				if got.Error == nil || got.Error.Code != tt.wantCode || got.Error.Message == "" {
					t.Errorf("body = %s, want an error with code %q and a message", body, tt.wantCode)
				}
			}
		})
	}
}

// TestReadyzAsksWithTheRequestContext: a client that goes away must stop
// the readiness query, so Ready gets the request's context.
func TestReadyzAsksWithTheRequestContext(t *testing.T) {
	type key struct{}
	var gotValue any
	h := newHandler(t, readiness(func(ctx context.Context) error {
		gotValue = ctx.Value(key{})
		return nil
	}))
	req := httptest.NewRequest(http.MethodGet, "/readyz", nil)
	req = req.WithContext(context.WithValue(req.Context(), key{}, "the request's"))
	h.ServeHTTP(httptest.NewRecorder(), req)
	if gotValue != "the request's" {
		t.Errorf("Ready saw context value %v, want the request's context", gotValue)
	}
}
