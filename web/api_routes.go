package web

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// The JSON API (SPEC §4): every handler here sits behind s.api, which
// says who asks and checked the route's scope. Bodies are decoded strictly
// (decodeJSON), every refusal goes through apiFail, and a continuation
// runs inside the request like the playground's: streamed when the client
// accepts application/x-ndjson, else answered as one JSON document.

// openAPIDocument describes every /api route; web/openapi_test.go keeps it
// and the router in step.
//
//go:embed openapi.json
var openAPIDocument []byte

func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(openAPIDocument); err != nil {
		s.log.Debug("write response", "err", err)
	}
}

// approvalJSON is one open question, as GET /api/approvals lists it.
type approvalJSON struct {
	RunID             int64           `json:"run_id"`
	Configuration     string          `json:"configuration"`
	ConfigurationName string          `json:"configuration_name"`
	Kind              string          `json:"kind"` // approval or input
	PendingCalls      []callJSON      `json:"pending_calls"`
	TurnDigest        string          `json:"turn_digest"`
	WaitingSince      *string         `json:"waiting_since"`
	Note              string          `json:"note,omitempty"`
	Schema            json.RawMessage `json:"schema,omitempty"`
}

// apiApprovals lists the open questions the caller may answer, oldest
// first: what the inbox shows, as JSON.
func (s *Server) apiApprovals(w http.ResponseWriter, r *http.Request, _ httprouter.Params, actor runtime.Actor) {
	pending, err := s.engine.Pending(r.Context(), actor, true)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	out := make([]approvalJSON, 0, len(pending))
	for _, p := range pending {
		a := approvalJSON{RunID: p.Run.ID, Configuration: p.Configuration.Identifier,
			ConfigurationName: p.Configuration.Name, Kind: p.Turn.Kind, PendingCalls: pendingCalls(&p.Turn),
			TurnDigest: p.Run.TurnDigest, Note: p.Turn.Note}
		if p.Run.WaitingSince != nil {
			since := p.Run.WaitingSince.UTC().Format(timeFormat)
			a.WaitingSince = &since
		}
		if p.Turn.Kind == runtime.TurnInput {
			a.Schema = p.Turn.Schema
		}
		out = append(out, a)
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"approvals": out})
}

// startBody is the body of POST /api/runs.
type startBody struct {
	Configuration string `json:"configuration"`
	Prompt        string `json:"prompt"`
	Async         bool   `json:"async"`
	Origin        string `json:"origin"`
}

// apiStartRun starts a run owned by the caller. With async it is queued
// for a worker and answered at once; otherwise it runs inside the request
// until it pauses or settles, and the answer carries its steps and
// outcome (or streams them, for a client that accepts NDJSON).
func (s *Server) apiStartRun(w http.ResponseWriter, r *http.Request, _ httprouter.Params, actor runtime.Actor) {
	var body startBody
	if !s.decodeAPIBody(w, r, &body) {
		return
	}
	if body.Configuration == "" {
		s.apiFail(w, r, invalid("configuration is required: the identifier of an agent configuration, e.g. \"refund-agent\""))
		return
	}
	req := runtime.StartRequest{Configuration: body.Configuration, Prompt: body.Prompt, Owner: actor,
		Origin: runtime.Origin(body.Origin)}
	enqueue := func() {
		id, err := s.engine.Enqueue(r.Context(), req)
		if err != nil {
			s.apiFail(w, r, err)
			return
		}
		s.answerRun(w, r, id, actor, http.StatusCreated, nil)
	}
	if body.Async {
		enqueue()
		return
	}
	path, release, ok := s.apiPath(w, r)
	if !ok {
		return
	}
	defer release()
	if path == runtime.PathDurable {
		// This server runs no continuation for it now: a worker starts it.
		enqueue()
		return
	}
	c, err := s.engine.Start(r.Context(), req)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	w.Header().Set("Location", fmt.Sprintf("/api/runs/%d", c.RunID()))
	if wantsStream(r) {
		s.runContinuation(w, r, c, true, true, http.StatusOK)
		return
	}
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	steps, out := collectSteps(r.Context(), c, true)
	s.answerRun(w, r, c.RunID(), actor, http.StatusCreated, map[string]any{"steps": steps, "outcome": terminalLine(out)})
}

// apiRun answers a run to its owner and admins; to anyone else it does not
// exist.
func (s *Server) apiRun(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := runID(ps)
	if !ok {
		s.apiFail(w, r, unknownRun(ps))
		return
	}
	s.answerRun(w, r, id, actor, http.StatusOK, nil)
}

// apiCancel cancels a run: at once when nobody holds it, at its next step
// boundary when it runs ("cancel": "requested").
func (s *Server) apiCancel(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := runID(ps)
	if !ok {
		s.apiFail(w, r, unknownRun(ps))
		return
	}
	res, err := s.engine.Cancel(r.Context(), id, actor)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	how := "done"
	if res.Status != runtime.StatusCancelled {
		how = "requested"
	}
	s.answerRun(w, r, id, actor, http.StatusOK, map[string]any{"cancel": how})
}

// decisionBody is the body of POST /api/runs/:id/decisions.
type decisionBody struct {
	TurnDigest string `json:"turn_digest"`
	Decision   string `json:"decision"`
	Scope      string `json:"scope"`
	Reason     string `json:"reason"`
}

// apiDecide approves or denies a run's pending turn and carries the
// decision out inside the request.
func (s *Server) apiDecide(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := runID(ps)
	if !ok {
		s.apiFail(w, r, unknownRun(ps))
		return
	}
	var body decisionBody
	if !s.decodeAPIBody(w, r, &body) || !s.checkDigest(w, r, body.TurnDigest) {
		return
	}
	path, release, ok := s.apiPath(w, r)
	if !ok {
		return
	}
	defer release()
	c, err := s.engine.Decide(r.Context(), runtime.DecideRequest{RunID: id, Digest: body.TurnDigest,
		Decision: body.Decision, Scope: body.Scope, Reason: body.Reason, Actor: actor, Path: path})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.apiContinue(w, r, id, actor, c)
}

// inputBody is the body of POST /api/runs/:id/input.
type inputBody struct {
	TurnDigest string          `json:"turn_digest"`
	Input      json.RawMessage `json:"input"`
}

// apiInput answers a run's input turn and carries the answer out inside
// the request. An answer that does not fit the turn's schema is 422 with a
// message per field.
func (s *Server) apiInput(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := runID(ps)
	if !ok {
		s.apiFail(w, r, unknownRun(ps))
		return
	}
	var body inputBody
	if !s.decodeAPIBody(w, r, &body) || !s.checkDigest(w, r, body.TurnDigest) {
		return
	}
	if in := bytes.TrimSpace(body.Input); len(in) == 0 || in[0] != '{' {
		s.apiFail(w, r, invalid("input is required: a JSON object with one field per property of the pending turn's schema (see GET /api/approvals)"))
		return
	}
	path, release, ok := s.apiPath(w, r)
	if !ok {
		return
	}
	defer release()
	c, err := s.engine.SubmitInput(r.Context(), runtime.InputRequest{RunID: id, Digest: body.TurnDigest,
		Input: body.Input, Actor: actor, Path: path})
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	s.apiContinue(w, r, id, actor, c)
}

// apiPath chooses where a continuation the API asks for runs (see
// paths.choose). The API wants the outcome, so it runs in the request
// whenever a slot is free, as a streamed decision does; with every slot
// taken it goes to a worker, or is refused with 503 and Retry-After when
// none is alive. Nothing is claimed yet.
func (s *Server) apiPath(w http.ResponseWriter, r *http.Request) (string, func(), bool) {
	path, release, err := s.paths.choose(r.Context(), true)
	if errors.Is(err, errBusy) {
		s.metrics.refused(surfaceAPI, codeBusy)
		w.Header().Set("Retry-After", "5")
		s.apiError(w, r, http.StatusServiceUnavailable, "busy", "the server runs as many continuations as it may; try again in a few seconds", nil)
		return "", release, false
	}
	return path, release, true
}

// apiContinue carries a claimed decision out. On the durable path a worker
// does, and the answer is 202 with the run, now decided. Otherwise it runs
// here: with every step's content for the run's owner and admins, and
// without any for a decider who holds the approve grant only, who may
// decide the run but not read it (as in the inbox).
func (s *Server) apiContinue(w http.ResponseWriter, r *http.Request, id int64, actor runtime.Actor, c *runtime.Continuation) {
	if c == nil {
		// The decider may hold only the approve grant, so the answer tells
		// no more of the run than the decision itself.
		s.writeJSON(w, http.StatusAccepted, map[string]any{"path": runtime.PathDurable,
			"run": map[string]any{"id": id, "status": runtime.StatusDecided}})
		return
	}
	// Visible's rule (admins and the owner read a run's content), without
	// its two queries: the claimed run says whose it is, and nothing more
	// should stand between the claim and the stream's first line.
	full := actor.Role == runtime.RoleAdmin || actor.ID == c.OwnerID()
	s.runContinuation(w, r, c, wantsStream(r), full, http.StatusOK)
}

// answerRun writes {"run": …} and the extra fields with a status; a run
// the caller may not see is 404.
func (s *Server) answerRun(w http.ResponseWriter, r *http.Request, id int64, actor runtime.Actor, status int, extra map[string]any) {
	run, cfg, err := s.engine.Visible(r.Context(), id, actor)
	if err != nil {
		s.apiFail(w, r, err)
		return
	}
	body := map[string]any{"run": toRunJSON(run, cfg.Identifier)}
	for k, v := range extra {
		body[k] = v
	}
	if status == http.StatusCreated {
		w.Header().Set("Location", fmt.Sprintf("/api/runs/%d", id))
	}
	s.writeJSON(w, status, body)
}

// decodeAPIBody decodes a request body strictly (decodeJSON) and answers
// its refusal: 413 for a body over the limit, 400 for anything else.
func (s *Server) decodeAPIBody(w http.ResponseWriter, r *http.Request, dst any) bool {
	err := decodeJSON(w, r, dst)
	if errors.Is(err, errTooLarge) {
		s.apiError(w, r, http.StatusRequestEntityTooLarge, "body_too_large",
			fmt.Sprintf("the body is larger than the %d bytes this API takes", maxAPIBytes), nil)
		return false
	}
	if err != nil {
		s.apiFail(w, r, err)
		return false
	}
	return true
}

var digestForm = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkDigest refuses a missing or malformed turn digest before anything
// is read: without one, a decision could only lose its claim.
func (s *Server) checkDigest(w http.ResponseWriter, r *http.Request, digest string) bool {
	switch {
	case digest == "":
		s.apiFail(w, r, invalid("turn_digest is required: the digest of the pending turn you decide, from GET /api/approvals or GET /api/runs/{id}"))
		return false
	case !digestForm.MatchString(digest):
		s.apiFail(w, r, invalid("turn_digest must be 64 lowercase hex digits, as GET /api/approvals gives it"))
		return false
	}
	return true
}

func invalid(message string) error {
	return &runtime.Refusal{Code: runtime.CodeInvalidRequest, Message: message}
}

// unknownRun is the refusal for a run id that names no run the caller may
// see, a malformed one included.
func unknownRun(ps httprouter.Params) error {
	msg := fmt.Sprintf("no run %s", ps.ByName("id"))
	if _, ok := runID(ps); !ok {
		msg = fmt.Sprintf("no run %q: run ids are positive integers, written without a sign or leading zeros", ps.ByName("id"))
	}
	return &runtime.Refusal{Code: runtime.CodeNotFound, Message: msg}
}
