// Package web is Turnstile's HTTP surface: routes, handlers, the NDJSON
// streamer, auth and the embedded static files. It talks to the engine and
// the store through the small interfaces it declares.
package web

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// Readiness is what /readyz asks: the database answers and every migration
// is applied.
type Readiness interface {
	Ready(ctx context.Context) error
}

// Server holds the handlers' dependencies.
type Server struct {
	log   *slog.Logger
	ready Readiness
}

// Deps are the server's dependencies.
type Deps struct {
	Logger *slog.Logger
	Ready  Readiness
}

// New returns a server.
func New(d Deps) *Server {
	return &Server{log: d.Logger, ready: d.Ready}
}

// Handler returns the router with every route.
func (s *Server) Handler() http.Handler {
	r := httprouter.New()
	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeJSON(w, http.StatusNotFound, errorBody("not_found", "no such page"))
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeJSON(w, http.StatusMethodNotAllowed, errorBody("method_not_allowed", r.Method+" is not allowed here"))
	})
	r.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		s.log.Error("panic", "method", r.Method, "path", r.URL.Path, "panic", v)
		s.writeJSON(w, http.StatusInternalServerError, errorBody("internal", "something went wrong on our side"))
	}
	return r
}

// healthz answers while the process serves, whatever the database does.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when the database answers and is migrated, so a
// load balancer sends no traffic to an instance that cannot decide.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if err := s.ready.Ready(r.Context()); err != nil {
		s.log.Warn("not ready", "err", err)
		s.writeJSON(w, http.StatusServiceUnavailable, errorBody("not_ready", "the database is not reachable or not migrated"))
		return
	}
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func errorBody(code, message string) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": message}}
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		s.log.Debug("write response", "err", err)
	}
}
