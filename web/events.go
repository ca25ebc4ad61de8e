package web

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Stub until the event stream lands.
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ runtime.Actor) {
	s.apiError(w, r, http.StatusNotImplemented, "not_implemented", "not yet", nil)
}
