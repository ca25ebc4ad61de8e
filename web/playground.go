package web

import (
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// The playground lets admins start runs as themselves and watch them with
// full content (every route is behind s.admin: anyone else gets a 404).
// Each POST answers in one of three ways, chosen in this order:
//
//   - stream=1 (a form value, in the body or the query): the playground
//     stream, step lines, keepalives and one outcome line; playground.js
//     always asks for it.
//   - an Accept header that ranks text/html above application/json (a
//     browser's native form post, without JavaScript): the playground page
//     again, with the run's steps, its outcome and the form that resumes it;
//     a refusal is a 303 back to the playground with a flash, or the page
//     again with the input form's errors (422).
//   - anything else, a missing Accept included: one JSON document,
//     {"steps":[…],"outcome":{…}}; a refusal is a JSON error.
//
// Every continuation runs inside the request, the playground exists to
// watch it, so --decision-path does not apply here; it goes on to its end
// if the client leaves, and it holds one of the --max-continuations slots
// like any in-request continuation: with none free the answer is 503 with
// Retry-After, before anything is claimed.

// runIDHeader names the run a playground answer carries out.
const runIDHeader = "Turnstile-Run-Id"

// playgroundWantsPage reports whether a playground request is answered
// with the page (a native form post) rather than JSON.
func playgroundWantsPage(r *http.Request) bool {
	return r.Form.Get("stream") != "1" && prefersHTML(r)
}

func (s *Server) playground(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	page, err := s.playgroundPage(r, "", "")
	if err != nil {
		s.refuse(w, r, s.at.page, 0, err)
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
	sf := s.at.playground
	_, release, err := s.admission.choose(r.Context(), wantRequest)
	if err != nil {
		s.refuse(w, r, sf, 0, err)
		return
	}
	defer release()
	prompt := r.PostForm.Get("prompt")
	c, err := s.engine.Start(r.Context(), runtime.StartRequest{Configuration: r.PostForm.Get("configuration"),
		Prompt: prompt, Owner: currentUser(r).Actor(), Origin: runtime.OriginInteractive})
	if err != nil {
		s.refuse(w, r, sf, 0, err)
		return
	}
	s.playgroundRun(w, r, c, prompt)
}

// playgroundResume approves or denies the pending turn of a run. The
// playground is not the inbox: process runs may be decided here too.
func (s *Server) playgroundResume(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.playground, ps)
	if !ok {
		return
	}
	s.decide(w, r, s.at.playground, id, s.approval(approvalForm(r, id)))
}

// playgroundInput answers the input turn of a run with the form's fields,
// read by the turn's schema.
func (s *Server) playgroundInput(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.playground, ps)
	if !ok {
		return
	}
	s.decide(w, r, s.at.playground, id, s.answering(inputForm(r, id)))
}

// playgroundRun answers a claimed continuation as the request asked: see
// the top of this file. Admins read every run in full.
func (s *Server) playgroundRun(w http.ResponseWriter, r *http.Request, c *runtime.Continuation, prompt string) {
	// Before the first line: playground.js offers a Cancel button for the
	// run while it streams, and a new run's id is in no line until the
	// last.
	w.Header().Set(runIDHeader, strconv.FormatInt(c.RunID(), 10))
	switch {
	case r.Form.Get("stream") == "1":
		s.streamSteps(w, r, c, true)
	case playgroundWantsPage(r):
		s.playgroundResult(w, r, c, prompt)
	default:
		steps, out := collectSteps(w, r, c, true)
		s.writeJSON(w, http.StatusOK, map[string]any{"steps": steps, "outcome": outcomeLine(out, true)})
	}
}

// playgroundResult runs a continuation to its end and renders the
// playground with what it did: the no-JavaScript answer.
func (s *Server) playgroundResult(w http.ResponseWriter, r *http.Request, c *runtime.Continuation, prompt string) {
	// The observer runs on the continuation's goroutine, and Run returns
	// after the last step: steps needs no lock.
	var steps []templates.PlaygroundStep
	out := runToEnd(w, r, c, runtime.ObserverFunc(func(st runtime.Step) {
		steps = append(steps, templates.PlaygroundStep{Seq: st.Seq, Kind: string(st.Kind), Round: st.Round,
			Duration: fmt.Sprintf("%d ms", st.DurationMS), Content: indent(st.Full)})
	}))
	s.renderResult(w, r, http.StatusOK, out.RunID, prompt, steps, playgroundOutcome(out))
}

// renderResult renders the playground with a run's steps and outcome.
func (s *Server) renderResult(w http.ResponseWriter, r *http.Request, status int, id int64, prompt string,
	steps []templates.PlaygroundStep, o templates.PlaygroundOutcome) {
	_, cfg, err := s.engine.Visible(r.Context(), id, currentUser(r).Actor())
	if err != nil {
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	page, err := s.playgroundPage(r, cfg.Identifier, prompt)
	if err != nil {
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	page.Result = &templates.PlaygroundResult{RunID: id, Configuration: cfg.Name,
		FourEyes: cfg.RequireSecondApprover, Steps: steps, Outcome: withSettleDetail(o, steps)}
	s.render(w, r, status, templates.Playground(page))
}

// playgroundOutcome shapes an outcome for the page. Its kind and code come
// from outcomeKind, so the page and the stream always agree on how a run
// ended; a failed run's message says its reason in words.
func playgroundOutcome(out runtime.Outcome) templates.PlaygroundOutcome {
	kind, code, message := outcomeKind(out)
	o := templates.PlaygroundOutcome{Event: kind, Code: code, Message: message}
	if (kind == outcomeAwaitingApproval || kind == outcomeAwaitingInput) && out.Pending != nil {
		o = pausedOutcome(kind, out.Digest, out.Pending)
		if kind == outcomeAwaitingInput {
			o.Fields = inputFields(out.Pending.Schema, nil, nil)
		}
	}
	if out.Status == runtime.StatusFailed {
		// The stream's message names the reason by its code; a person
		// reads it in words, with the cause from the run's settle step
		// (renderResult finds it among the steps).
		o.Failure = &templates.RunFailure{Reason: out.Reason}
		o.Message = "The run failed: " + templates.ReasonText(out.Reason) + "."
	}
	o.Answer, o.Iterations = out.Answer, out.Iterations
	o.InputTokens, o.OutputTokens = out.Usage.InputTokens, out.Usage.OutputTokens
	return o
}

// pausedOutcome is a pause as the page shows it: the turn's calls and, for
// an input, the tool that asks.
func pausedOutcome(kind, digest string, turn *runtime.PendingTurn) templates.PlaygroundOutcome {
	o := templates.PlaygroundOutcome{Event: kind, Digest: digest, Note: turn.Note}
	for _, c := range turn.Calls {
		o.Calls = append(o.Calls, templates.Call{ID: c.ID, Name: c.Name, Arguments: indent(c.Arguments)})
	}
	if kind == outcomeAwaitingInput {
		o.Tool = turn.Calls[0].Name
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
