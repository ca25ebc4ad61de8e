package web

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Stubs until the JSON API lands.

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.apiError(w, r, http.StatusNotImplemented, "not_implemented", "not yet", nil)
}

func (s *Server) apiApprovals(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ runtime.Actor) {
	s.apiError(w, r, http.StatusNotImplemented, "not_implemented", "not yet", nil)
}

func (s *Server) apiStartRun(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ runtime.Actor) {
	s.apiError(w, r, http.StatusNotImplemented, "not_implemented", "not yet", nil)
}

func (s *Server) apiRun(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ runtime.Actor) {
	s.apiError(w, r, http.StatusNotImplemented, "not_implemented", "not yet", nil)
}

func (s *Server) apiCancel(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ runtime.Actor) {
	s.apiError(w, r, http.StatusNotImplemented, "not_implemented", "not yet", nil)
}

func (s *Server) apiDecide(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ runtime.Actor) {
	s.apiError(w, r, http.StatusNotImplemented, "not_implemented", "not yet", nil)
}

func (s *Server) apiInput(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ runtime.Actor) {
	s.apiError(w, r, http.StatusNotImplemented, "not_implemented", "not yet", nil)
}
