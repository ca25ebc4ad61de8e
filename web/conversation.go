package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// A follow-up message starts a settled run's next turn (see
// runtime/conversation.go). The API answers it as it answers a start; the
// run page's form, without JavaScript, lands back on the run page, and
// with it streams the turn into the page.

// messageBody is the body of POST /api/runs/:id/messages.
type messageBody struct {
	Content string `json:"content"`
	Async   bool   `json:"async"`
}

// apiMessage sends a follow-up message into a run: 201 with the run once
// its turn pauses or settles, the turn's lines for a client that accepts
// NDJSON, or at once with async (a worker carries the turn out).
func (s *Server) apiMessage(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := s.runParam(w, r, s.at.api, ps)
	if !ok {
		return
	}
	var body messageBody
	if err := decodeJSON(w, r, &body); err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	req := runtime.MessageRequest{RunID: id, Content: body.Content, Actor: actor}
	s.apiTurn(w, r, actor, body.Async, id,
		func(ctx context.Context) (int64, error) { return id, s.engine.QueueMessage(ctx, req) },
		func(ctx context.Context) (*runtime.Continuation, error) { return s.engine.SendMessage(ctx, req) })
}

// pageMessage is the run page's "Send a follow-up" form. A script's post
// (Accept: application/x-ndjson) gets the turn's lines, as the API
// streams them. A native post takes the durable path while a worker is
// alive and lands on the run page at once, which shows the turn as it
// goes on; else the turn runs in the request and the run page shows how
// it ended.
func (s *Server) pageMessage(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.page, ps)
	if !ok {
		return
	}
	req := runtime.MessageRequest{RunID: id, Content: r.PostFormValue("content"), Actor: currentUser(r).Actor()}
	want := wantAnswer
	if wantsStream(r) {
		want = wantStream
	}
	path, release, err := s.admission.choose(r.Context(), want)
	if err != nil {
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	defer release()
	back := fmt.Sprintf("/runs/%d", id)
	if path == runtime.PathDurable {
		if err := s.engine.QueueMessage(r.Context(), req); err != nil {
			s.refuse(w, r, s.at.page, id, err)
			return
		}
		s.flash(r.Context(), "Message sent; the answer appears below once the turn has run.")
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	c, err := s.engine.SendMessage(r.Context(), req)
	if err != nil {
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	if wantsStream(r) {
		s.streamSteps(w, r, c, true)
		return
	}
	out := runToEnd(w, r, c, nil)
	s.flash(r.Context(), turnFlash(out))
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// turnFlash says in words how a follow-up's turn ended.
func turnFlash(out runtime.Outcome) string {
	switch {
	case out.Status.Waiting():
		return "The agent waits for a decision before it can answer."
	case out.Status == runtime.StatusCompleted:
		return "The agent answered."
	case out.Status == runtime.StatusRunning:
		return "The turn goes on in the background; its answer appears below."
	}
	return fmt.Sprintf("The turn ended: %s.", out.Status)
}
