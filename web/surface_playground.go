package web

import (
	"fmt"
	"net/http"

	"github.com/turnstile-dev/turnstile/runtime"
)

// playgroundSurface answers the playground's decisions, always in the
// request (see the top of playground.go): the page for a native form
// post, else JSON or the playground stream. Admins read every run in full.
type playgroundSurface struct{ s *Server }

func (playgroundSurface) name() string { return "playground" }

// html: see playgroundWantsPage.
func (playgroundSurface) html(r *http.Request) bool { return playgroundWantsPage(r) }
func (playgroundSurface) back(int64) string         { return "/playground" }
func (playgroundSurface) ownWords() bool            { return false }
func (playgroundSurface) want(*http.Request) want   { return wantRequest }

// recorded is never called: the playground wants its continuation in the
// request (wantRequest), and admission sends such a decision down no
// other path. Reaching it is a bug, answered as one.
func (sf playgroundSurface) recorded(w http.ResponseWriter, r *http.Request, id int64) {
	sf.s.refuse(w, r, sf, id, fmt.Errorf("web: a playground decision about run %d took the durable path", id))
}

func (sf playgroundSurface) run(w http.ResponseWriter, r *http.Request, c *runtime.Continuation) {
	sf.s.playgroundRun(w, r, c, "")
}

// follow streams the winner's steps to playground.js, which always asks
// for the stream (stream=1).
func (sf playgroundSurface) follow(w http.ResponseWriter, r *http.Request, f *follower) bool {
	if r.Form.Get("stream") != "1" {
		return false
	}
	sf.s.streamSteps(w, r, f, true) // admins only
	return true
}

// invalid shows the playground again with the run's input form, the
// admin's values and a message per field: a refused answer. A run that no
// longer waits for input by then (someone answered or cancelled it since)
// is refused as the table says.
func (sf playgroundSurface) invalid(w http.ResponseWriter, r *http.Request, id int64, ref *runtime.Refusal) {
	s := sf.s
	turn, err := s.engine.Turn(r.Context(), id)
	if err == nil && turn.Kind != runtime.TurnInput {
		err = &runtime.Refusal{Code: runtime.CodeNotWaiting, Message: fmt.Sprintf("run %d waits for no input", id)}
	}
	if err != nil {
		s.refuse(w, r, sf, id, err)
		return
	}
	o := pausedOutcome(outcomeAwaitingInput, r.PostForm.Get("turn_digest"), turn)
	o.Fields = inputFields(turn.Schema, r.PostForm, ref.Fields)
	o.Message = "Some fields need another look."
	s.renderResult(w, r, http.StatusUnprocessableEntity, id, "", nil, o)
}
