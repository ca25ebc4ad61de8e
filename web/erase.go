package web

import (
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// Erasing a settled run (Engine.Erase): DELETE /api/runs/:id?erase=true
// in the API, and on the pages the run page's Erase button, which asks
// first (in the page with erase.js, on GET /runs/:id/erase without it)
// and posts to POST /runs/:id/erase.

// apiDeleteRun is DELETE /api/runs/:id: a cancel, or with erase=true an
// erase. Any other value of erase is refused, so that a typo never
// cancels a run that was meant to be erased, or the other way round.
func (s *Server) apiDeleteRun(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	switch r.URL.Query().Get("erase") {
	case "", "false":
		s.apiCancel(w, r, ps, actor)
	case "true":
		s.apiErase(w, r, ps, actor)
	default:
		s.refuse(w, r, s.at.api, 0, invalid(`erase takes only "true" (erase the run's content) or "false" (cancel the run)`))
	}
}

// apiErase erases a settled run's content and answers what stays of it:
// its id and when it was erased. From then on the run's routes answer 404.
func (s *Server) apiErase(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := s.runParam(w, r, s.at.api, ps)
	if !ok {
		return
	}
	done, err := s.engine.Erase(r.Context(), id, actor)
	if err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"id": done.RunID, "erased": true, "erased_at": apiTime(&done.ErasedAt)})
}

// eraseConfirm is GET /runs/:id/erase: the question, on a page of its own,
// for a run the user may erase. A run they may not read is not found; one
// that has not settled sends them back to its page, saying why.
func (s *Server) eraseConfirm(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.page, ps)
	if !ok {
		return
	}
	run, _, err := s.engine.Visible(r.Context(), id, currentUser(r).Actor())
	if err == nil && !run.Status.Terminal() {
		err = &runtime.Refusal{Code: runtime.CodeNotSettled,
			Message: fmt.Sprintf("run %d has not settled: only a settled run can be erased; cancel it first", id)}
	}
	if err != nil {
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	s.render(w, r, http.StatusOK, templates.EraseConfirm(templates.ErasePage{
		Page: s.pageFor(r, fmt.Sprintf("Erase run %d", id)), RunID: id}))
}

// erase is POST /runs/:id/erase: the erase, then the history with a
// flash (the run's page is gone).
func (s *Server) erase(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.page, ps)
	if !ok {
		return
	}
	if _, err := s.engine.Erase(r.Context(), id, currentUser(r).Actor()); err != nil {
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	s.flash(r.Context(), fmt.Sprintf("Run %d was erased: its content is gone; who decided what, and when, stays.", id))
	http.Redirect(w, r, "/runs", http.StatusSeeOther)
}
