package web

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// run shows a run's timeline to its owner and admins; to anyone else it
// does not exist.
func (s *Server) run(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := runID(ps)
	if !ok {
		s.errorPage(w, r, http.StatusNotFound)
		return
	}
	u := currentUser(r)
	d, err := s.engine.Detail(r.Context(), id, u.Actor())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	run := d.Run
	sum := templates.RunSummary{ID: run.ID, Configuration: d.Configuration.Name, Origin: string(run.Origin),
		Status: string(run.Status), Reason: run.TerminationReason, Prompt: run.Prompt, Answer: run.Answer,
		Iterations: run.Iterations, CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt,
		Waiting: run.Status.Waiting(), CanCancel: !run.Status.Terminal()}
	if owner, err := s.users.User(r.Context(), run.OwnerID); err == nil {
		sum.Owner = owner.Name
	}
	page := templates.RunPage{Page: s.pageFor(r, fmt.Sprintf("Run %d", run.ID)), Run: sum}
	for _, e := range d.Events {
		page.Events = append(page.Events, templates.Event{Seq: e.Seq, Kind: string(e.Kind), Round: e.Round,
			Duration: fmt.Sprintf("%d ms", e.DurationMS), At: e.CreatedAt, Payload: indent(e.Payload)})
	}
	s.render(w, r, http.StatusOK, templates.RunDetail(page))
}

// cancel cancels a run: at once when nobody holds it, at the next step
// boundary when it runs.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := runID(ps)
	if !ok {
		s.errorPage(w, r, http.StatusNotFound)
		return
	}
	res, err := s.engine.Cancel(r.Context(), id, currentUser(r).Actor())
	var ref *runtime.Refusal
	switch {
	case err == nil && res.Status == runtime.StatusCancelled:
		s.flash(r.Context(), fmt.Sprintf("Run %d was cancelled.", id))
	case err == nil:
		s.flash(r.Context(), fmt.Sprintf("Run %d stops at its next step.", id))
	case errors.As(err, &ref) && ref.Code != runtime.CodeNotFound:
		// The engine's message names the run already: "run 5 is already cancelled".
		s.flash(r.Context(), strings.ToUpper(ref.Message[:1])+ref.Message[1:]+".")
	default:
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, fmt.Sprintf("/runs/%d", id), http.StatusSeeOther)
}
