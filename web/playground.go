package web

import (
	"context"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// The playground lets admins start runs as themselves and watch them with
// full content (every route is behind s.admin: anyone else gets a 404).
// Each POST answers in one of three ways, chosen in this order:
//
//   - stream=1 (a form value, in the body or the query): the playground
//     stream of SPEC §5, step lines, keepalives and one terminal line;
//     playground.js always asks for it.
//   - an Accept header that ranks text/html above application/json (a
//     browser's native form post, without JavaScript): the playground page
//     again, with the run's steps, its outcome and the form that resumes it.
//   - anything else, a missing Accept included: the one JSON document of
//     SPEC §5, {"steps":[…],"outcome":{…}}.
//
// Refusals are the JSON error bodies and statuses of the SPEC §4 table
// whatever the client asked for: nothing ran, so there is nothing to
// render but the refusal. Every continuation runs inside the request, the
// playground exists to watch it, so --decision-path does not apply here;
// it goes on to its end if the client leaves, and it holds one of the
// --max-continuations slots like any in-request continuation: with none
// free the answer is 503 with Retry-After, before anything is claimed.

func (s *Server) playground(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	page, err := s.playgroundPage(r, "", "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, templates.Playground(page))
}

// playgroundPage is the playground with its picker of active
// configurations and the start form filled in.
func (s *Server) playgroundPage(r *http.Request, selected, prompt string) (templates.PlaygroundPage, error) {
	cfgs, err := s.catalog.Configurations(r.Context())
	if err != nil {
		return templates.PlaygroundPage{}, fmt.Errorf("web: playground configurations: %w", err)
	}
	page := templates.PlaygroundPage{Page: s.pageFor(r, "Playground"), Selected: selected, Prompt: prompt}
	for _, c := range cfgs {
		if c.Active {
			page.Configurations = append(page.Configurations, templates.PlaygroundConfiguration{
				Identifier: c.Identifier, Name: c.Name, FourEyes: c.RequireSecondApprover})
		}
	}
	return page, nil
}

// playgroundStart starts an interactive run owned by the admin.
func (s *Server) playgroundStart(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	release, ok := s.playgroundSlot(w, r)
	if !ok {
		return
	}
	defer release()
	prompt := r.PostForm.Get("prompt")
	c, err := s.engine.Start(r.Context(), runtime.StartRequest{Configuration: r.PostForm.Get("configuration"),
		Prompt: prompt, Owner: currentUser(r).Actor(), Origin: runtime.OriginInteractive})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.playgroundContinue(w, r, c, prompt)
}

// playgroundResume approves or denies the pending turn of a run. The
// playground is not the inbox: process runs may be decided here too.
func (s *Server) playgroundResume(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := runID(ps)
	if !ok {
		s.apiFail(w, r, noRun(ps))
		return
	}
	release, ok := s.playgroundSlot(w, r)
	if !ok {
		return
	}
	defer release()
	c, err := s.engine.Decide(r.Context(), runtime.DecideRequest{RunID: id, Digest: r.PostForm.Get("turn_digest"),
		Decision: r.PostForm.Get("decision"), Scope: r.PostForm.Get("scope"), Reason: r.PostForm.Get("reason"),
		Actor: currentUser(r).Actor(), Path: runtime.PathRequest})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.playgroundContinue(w, r, c, "")
}

// playgroundInput answers the input turn of a run with the form's fields,
// read by the turn's schema.
func (s *Server) playgroundInput(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := runID(ps)
	if !ok {
		s.apiFail(w, r, noRun(ps))
		return
	}
	release, ok := s.playgroundSlot(w, r)
	if !ok {
		return
	}
	defer release()
	actor := currentUser(r).Actor()
	answer, fieldErrs, err := s.answer(r.Context(), id, r.PostForm)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	c, err := s.engine.SubmitInput(r.Context(), runtime.InputRequest{RunID: id, Digest: r.PostForm.Get("turn_digest"),
		Input: answer, FormErrors: fieldErrs, Actor: actor, Path: runtime.PathRequest})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.playgroundContinue(w, r, c, "")
}

// playgroundSlot takes one of the in-request continuation slots, or
// answers 503 when every one is taken.
func (s *Server) playgroundSlot(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	release, ok = s.paths.acquire()
	if !ok {
		s.metrics.refused(surfacePlayground, codeBusy)
		w.Header().Set("Retry-After", "5")
		s.apiError(w, r, http.StatusServiceUnavailable, "busy", "the server runs as many continuations as it may; try again shortly", nil)
	}
	return release, ok
}

func noRun(ps httprouter.Params) error {
	return &runtime.Refusal{Code: runtime.CodeNotFound, Message: fmt.Sprintf("no run %q", ps.ByName("id"))}
}

// playgroundContinue answers a claimed continuation as the request asked:
// see the top of this file.
func (s *Server) playgroundContinue(w http.ResponseWriter, r *http.Request, c *runtime.Continuation, prompt string) {
	switch {
	case r.Form.Get("stream") == "1":
		s.runContinuation(w, r, c, true, true, http.StatusOK)
	case prefersHTML(r):
		s.playgroundResult(w, r, c, prompt)
	default:
		s.runContinuation(w, r, c, false, true, http.StatusOK)
	}
}

// playgroundResult runs a continuation to its end and renders the
// playground with what it did: the no-JavaScript answer.
func (s *Server) playgroundResult(w http.ResponseWriter, r *http.Request, c *runtime.Continuation, prompt string) {
	ctx := context.WithoutCancel(r.Context())
	// The page comes only when the run pauses or settles, which may take
	// longer than the server's write timeout allows.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	// The observer runs on the continuation's goroutine, and Run returns
	// after the last step: steps needs no lock.
	var steps []templates.PlaygroundStep
	out := c.Run(ctx, runtime.ObserverFunc(func(st runtime.Step) {
		steps = append(steps, templates.PlaygroundStep{Seq: st.Seq, Kind: string(st.Kind), Round: st.Round,
			Duration: fmt.Sprintf("%d ms", st.DurationMS), Content: indent(st.Full)})
	}))
	_, cfg, err := s.engine.Visible(ctx, out.RunID, currentUser(r).Actor())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page, err := s.playgroundPage(r, cfg.Identifier, prompt)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page.Result = &templates.PlaygroundResult{RunID: out.RunID, Configuration: cfg.Name,
		FourEyes: cfg.RequireSecondApprover, Steps: steps, Outcome: playgroundOutcome(out)}
	s.render(w, r, http.StatusOK, templates.Playground(page))
}

// playgroundOutcome shapes an outcome for the page. The event, code and
// message come from terminalLine, so the page and the stream always agree
// on how a run ended.
func playgroundOutcome(out runtime.Outcome) templates.PlaygroundOutcome {
	line := terminalLine(out)
	o := templates.PlaygroundOutcome{Answer: out.Answer, Iterations: out.Iterations,
		InputTokens: out.Usage.InputTokens, OutputTokens: out.Usage.OutputTokens}
	o.Event, _ = line["event"].(string)
	o.Code, _ = line["code"].(string)
	o.Message, _ = line["message"].(string)
	if (o.Event == "awaiting_approval" || o.Event == "awaiting_input") && out.Pending != nil {
		o.Digest, o.Note = out.Digest, out.Pending.Note
		for _, c := range out.Pending.Calls {
			o.Calls = append(o.Calls, templates.Call{ID: c.ID, Name: c.Name, Arguments: indent(c.Arguments)})
		}
		if o.Event == "awaiting_input" {
			o.Tool = out.Pending.Calls[0].Name
			o.Fields = inputFields(out.Pending.Schema, nil, nil)
		}
	}
	return o
}

// prefersHTML reports whether a request's Accept header ranks text/html
// above application/json. Wildcards count for neither, so a client that
// sends none, or */*, gets JSON.
func prefersHTML(r *http.Request) bool {
	htmlQ, jsonQ := acceptQuality(r, "text/html"), acceptQuality(r, "application/json")
	return htmlQ > 0 && htmlQ > jsonQ
}

// acceptQuality is the highest q a request's Accept header gives a media
// type by name; 0 when it does not name it.
func acceptQuality(r *http.Request, mediaType string) float64 {
	best := 0.0
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != mediaType {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
			best = max(best, q)
		}
	}
	return best
}
