package web

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// titleBody is the body of PATCH /api/runs/:id.
type titleBody struct {
	Title string `json:"title"`
}

// apiSetTitle sets a run's title for its owner (or an admin) and answers
// the run.
func (s *Server) apiSetTitle(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := s.runParam(w, r, s.at.api, ps)
	if !ok {
		return
	}
	var body titleBody
	if err := decodeJSON(w, r, &body); err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	if err := s.engine.SetTitle(r.Context(), id, actor, body.Title); err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	s.answerRun(w, r, id, actor, http.StatusOK, nil)
}
