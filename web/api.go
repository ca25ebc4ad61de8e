package web

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// The JSON API: every handler here sits behind s.api, which says who asks
// and checked the route's scope. Bodies are decoded strictly (decodeJSON),
// every refusal is a JSON error from the one table (refuse), and a
// continuation runs inside the request like the playground's: streamed
// when the client accepts application/x-ndjson, else answered as one JSON
// document.

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
	// Previews say, by call id, what each call would do, in its tool's
	// words.
	Previews map[string]string `json:"previews,omitempty"`
	// Rules name, by call id, the rule of the configuration's policy that
	// asked for the turn's votes.
	Rules map[string]string `json:"rules,omitempty"`

	// DecisionDeadline is when the turn expires (decision_timeout), or
	// null; EscalatedTo names the grant an expired turn went on to.
	DecisionDeadline *string `json:"decision_deadline"`
	EscalatedTo      string  `json:"escalated_to,omitempty"`
	// ApprovalsRequired and Votes, on a turn that needs several approvals.
	ApprovalsRequired int            `json:"approvals_required,omitempty"`
	Votes             *runtime.Votes `json:"votes,omitempty"`
}

// Page sizes of the API's lists.
const (
	defaultAPIPage = 100
	maxAPIPage     = runtime.MaxPage
)

// pageLimit reads ?limit=N (1 to maxAPIPage, defaultAPIPage when absent).
func pageLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return defaultAPIPage, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxAPIPage {
		return 0, invalid(fmt.Sprintf("limit must be an integer from 1 to %d", maxAPIPage))
	}
	return n, nil
}

// apiApprovals is GET /api/approvals?limit=N&after=<cursor>: a page of
// the open questions the caller may answer, oldest first — what the inbox
// shows, as JSON — and the cursor of the next page (null on the last).
func (s *Server) apiApprovals(w http.ResponseWriter, r *http.Request, _ httprouter.Params, actor runtime.Actor) {
	limit, err := pageLimit(r)
	q := runtime.WaitingQuery{WithProcess: true, Limit: limit}
	if c := r.URL.Query().Get("after"); err == nil && c != "" {
		q.After, err = runtime.ParseWaitingCursor(c)
	}
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	pending, err := s.engine.Pending(r.Context(), actor, q)
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	out := make([]approvalJSON, 0, len(pending.Runs))
	for _, p := range pending.Runs {
		a := approvalJSON{RunID: p.Run.ID, Configuration: p.Configuration.Identifier,
			ConfigurationName: p.Configuration.Name, Kind: p.Turn.Kind, PendingCalls: pendingCalls(&p.Turn),
			TurnDigest: p.Run.TurnDigest, Note: p.Turn.Note, Previews: p.Turn.Previews, Rules: p.Turn.Rules}
		if p.Run.WaitingSince != nil {
			since := p.Run.WaitingSince.UTC().Format(timeFormat)
			a.WaitingSince = &since
		}
		if p.Turn.Kind == runtime.TurnInput {
			a.Schema = p.Turn.Schema
		}
		a.DecisionDeadline, a.EscalatedTo = apiTime(p.Run.DecisionDeadline), p.Turn.Escalated
		a.ApprovalsRequired, a.Votes = turnVotes(p.Turn.ApprovalsRequired, p.Run.Votes)
		out = append(out, a)
	}
	var next *string
	if pending.Next != nil {
		c := pending.Next.String()
		next = &c
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"approvals": out, "next": next, "total": pending.Total})
}

// listedRunJSON is a run as GET /api/runs lists it: in full to its owner
// and admins; to a decider of it, only its id, configuration, status,
// times and their own decision.
type listedRunJSON struct {
	ID            int64         `json:"id"`
	Configuration string        `json:"configuration"`
	Status        string        `json:"status"`
	Reason        string        `json:"termination_reason,omitempty"`
	CreatedAt     string        `json:"created_at"`
	UpdatedAt     string        `json:"updated_at"`
	Run           *runJSON      `json:"run,omitempty"`
	Decision      *decisionJSON `json:"your_decision,omitempty"`
	// ErasedAt is when the run's content was erased (then there is no
	// run, and no termination_reason); absent while it has content.
	ErasedAt *string `json:"erased_at,omitempty"`
}

type decisionJSON struct {
	Kind      string `json:"kind"`
	DecidedAt string `json:"decided_at"`
}

// apiRuns is GET /api/runs: a page of the runs the caller may see, newest
// first (see Engine.History), with the filters of runQuery, and the cursor
// of the next page (null on the last).
func (s *Server) apiRuns(w http.ResponseWriter, r *http.Request, _ httprouter.Params, actor runtime.Actor) {
	q, err := s.runQuery(r, actor)
	if err == nil {
		q.Limit, err = pageLimit(r)
	}
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	page, err := s.engine.History(r.Context(), actor, q)
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	out := make([]listedRunJSON, 0, len(page.Runs))
	for _, l := range page.Runs {
		j := listedRunJSON{ID: l.Run.ID, Configuration: l.Configuration.Identifier, Status: string(l.Run.Status),
			Reason: l.Run.TerminationReason, CreatedAt: l.Run.CreatedAt.UTC().Format(timeFormat),
			UpdatedAt: l.Run.UpdatedAt.UTC().Format(timeFormat)}
		if l.Erased {
			// Only that it was, and when it was erased: no content, and no
			// run to GET.
			j.Status, j.ErasedAt, j.Reason = "erased", apiTime(l.Run.ErasedAt), ""
		} else if l.MayRead {
			full := toRunJSON(l.Run, l.Configuration.Identifier)
			j.Run = &full
		}
		if l.Decision != nil {
			j.Decision = &decisionJSON{Kind: l.Decision.Kind, DecidedAt: l.Decision.DecidedAt.UTC().Format(timeFormat)}
		}
		out = append(out, j)
	}
	var next *string
	if page.Next != 0 {
		c := strconv.FormatInt(page.Next, 10)
		next = &c
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"runs": out, "next": next})
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
	if err := decodeJSON(w, r, &body); err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	if body.Configuration == "" {
		s.refuse(w, r, s.at.api, 0, invalid("configuration is required: the identifier of an agent configuration, e.g. \"refund-agent\""))
		return
	}
	req := runtime.StartRequest{Configuration: body.Configuration, Prompt: body.Prompt, Owner: actor,
		Origin: runtime.Origin(body.Origin)}
	s.apiTurn(w, r, actor, body.Async, 0,
		func(ctx context.Context) (int64, error) { return s.engine.Enqueue(ctx, req) },
		func(ctx context.Context) (*runtime.Continuation, error) { return s.engine.Start(ctx, req) })
}

// apiTurn answers a request that starts a turn, a run's first or a
// follow-up's, as both are answered. With async, or when no continuation
// slot is free and a worker lives, queue puts the turn on the durable path
// (a worker carries it out) and the answer is the run at once; else start
// runs it inside the request, streamed or as one document with its steps
// and outcome. id names the run in refusals (0 before there is one).
func (s *Server) apiTurn(w http.ResponseWriter, r *http.Request, actor runtime.Actor, async bool, id int64,
	queue func(context.Context) (int64, error), start func(context.Context) (*runtime.Continuation, error)) {
	path := runtime.PathDurable
	if !async {
		var release func()
		var err error
		if path, release, err = s.admission.choose(r.Context(), wantStream); err != nil {
			s.refuse(w, r, s.at.api, id, err)
			return
		}
		defer release()
	}
	if path == runtime.PathDurable {
		// This server runs no continuation for it now: a worker does.
		queued, err := queue(r.Context())
		if err != nil {
			s.refuse(w, r, s.at.api, id, err)
			return
		}
		s.answerRun(w, r, queued, actor, http.StatusCreated, nil)
		return
	}
	c, err := start(r.Context())
	if err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	w.Header().Set("Location", fmt.Sprintf("/api/runs/%d", c.RunID()))
	if wantsStream(r) {
		s.streamSteps(w, r, c, true)
		return
	}
	steps, out := collectSteps(w, r, c, true)
	s.answerRun(w, r, c.RunID(), actor, http.StatusCreated, map[string]any{"steps": steps, "outcome": outcomeLine(out, true)})
}

// apiRun answers a run to its owner and admins; to anyone else it does not
// exist.
func (s *Server) apiRun(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := s.runParam(w, r, s.at.api, ps)
	if !ok {
		return
	}
	s.answerRun(w, r, id, actor, http.StatusOK, nil)
}

// apiCancel cancels a run: at once when nobody holds it, at its next step
// boundary when it runs ("cancel": "requested").
func (s *Server) apiCancel(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := s.runParam(w, r, s.at.api, ps)
	if !ok {
		return
	}
	res, err := s.engine.Cancel(r.Context(), id, actor)
	if err != nil {
		s.refuse(w, r, s.at.api, id, err)
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
	// Arguments replace, by call id, the arguments of pending calls: an
	// approval of the calls as edited (see runtime/decide_edit.go).
	Arguments map[string]json.RawMessage `json:"arguments"`
	// Calls decide the turn call by call, naming every pending call (see
	// runtime/decide_calls.go); decision may then be left out.
	Calls map[string]callBody `json:"calls"`
}

// callBody is the decision about one call in a decisionBody's calls.
type callBody struct {
	Decision  string          `json:"decision"`
	Reason    string          `json:"reason"`
	Arguments json.RawMessage `json:"arguments"`
}

// decideCalls is the engine's form of a body's calls; nil without them.
func decideCalls(calls map[string]callBody) map[string]runtime.CallDecision {
	if calls == nil {
		return nil
	}
	out := make(map[string]runtime.CallDecision, len(calls))
	for id, c := range calls {
		out[id] = runtime.CallDecision{Decision: c.Decision, Reason: c.Reason, Arguments: c.Arguments}
	}
	return out
}

// apiDecide approves or denies a run's pending turn, or decides it call by
// call, with an approval's edited arguments: 422 invalid_input with a
// message per field ("arguments.<call id>.<property>", or
// "calls.<call id>…" for the calls) when they do not fit the turn.
func (s *Server) apiDecide(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := s.runParam(w, r, s.at.api, ps)
	if !ok {
		return
	}
	var body decisionBody
	if err := decodeTurn(w, r, &body, &body.TurnDigest); err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	s.decide(w, r, s.at.api, id, s.approval(runtime.DecideRequest{RunID: id, Digest: body.TurnDigest,
		Decision: body.Decision, Scope: body.Scope, Reason: body.Reason, Arguments: body.Arguments,
		Calls: decideCalls(body.Calls), Actor: actor}))
}

// inputBody is the body of POST /api/runs/:id/input.
type inputBody struct {
	TurnDigest string          `json:"turn_digest"`
	Input      json.RawMessage `json:"input"`
}

// apiInput answers a run's input turn. An answer that does not fit the
// turn's schema is 422 with a message per field.
func (s *Server) apiInput(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	id, ok := s.runParam(w, r, s.at.api, ps)
	if !ok {
		return
	}
	var body inputBody
	err := decodeTurn(w, r, &body, &body.TurnDigest)
	if in := bytes.TrimSpace(body.Input); err == nil && (len(in) == 0 || in[0] != '{') {
		err = invalid("input is required: a JSON object with one field per property of the pending turn's schema (see GET /api/approvals)")
	}
	if err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	s.decide(w, r, s.at.api, id, s.answering(runtime.InputRequest{RunID: id, Digest: body.TurnDigest,
		Input: body.Input, Actor: actor}))
}

// answerRun writes {"run": …} and the extra fields with a status; a run
// the caller may not see is 404.
func (s *Server) answerRun(w http.ResponseWriter, r *http.Request, id int64, actor runtime.Actor, status int, extra map[string]any) {
	run, cfg, err := s.engine.Visible(r.Context(), id, actor)
	if err != nil {
		s.refuse(w, r, s.at.api, id, err)
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

// runJSON is a run as the API shows it.
type runJSON struct {
	ID            int64  `json:"id"`
	Configuration string `json:"configuration"`
	Status        string `json:"status"`
	Origin        string `json:"origin"`
	Title         string `json:"title"`
	// Turn is the conversation's current turn: 1 until a follow-up.
	Turn         int    `json:"turn"`
	TurnDigest   string `json:"turn_digest,omitempty"`
	Reason       string `json:"termination_reason,omitempty"`
	Answer       string `json:"answer,omitempty"`
	Iterations   int    `json:"iterations"`
	InputTokens  int    `json:"input_tokens"`
	OutputTokens int    `json:"output_tokens"`
	CreatedAt    string `json:"created_at"`
	UpdatedAt    string `json:"updated_at"`

	// DecisionDeadline is when the pending turn expires, null without one.
	DecisionDeadline *string `json:"decision_deadline"`
	// ApprovalsRequired and Votes, on a waiting turn that needs several
	// approvals: how many, and the votes on that turn so far (see votes.go).
	ApprovalsRequired int            `json:"approvals_required,omitempty"`
	Votes             *runtime.Votes `json:"votes,omitempty"`
}

// apiTime is a nullable time as the API writes it.
func apiTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(timeFormat)
	return &s
}

func toRunJSON(r *runtime.Run, configuration string) runJSON {
	j := runJSON{ID: r.ID, Configuration: configuration, Status: string(r.Status), Origin: string(r.Origin),
		Title: r.Title, Turn: r.ConversationTurn, Reason: r.TerminationReason, Answer: r.Answer, Iterations: r.Iterations,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		CreatedAt: r.CreatedAt.UTC().Format(timeFormat), UpdatedAt: r.UpdatedAt.UTC().Format(timeFormat)}
	j.DecisionDeadline = apiTime(r.DecisionDeadline)
	if r.Status.Waiting() {
		// A digest names the turn that waits; once decided it names
		// nothing anyone can act on (the OpenAPI document says so).
		j.TurnDigest = r.TurnDigest
		j.ApprovalsRequired, j.Votes = turnVotes(r.ApprovalsRequired, r.Votes)
	}
	return j
}

const timeFormat = "2006-01-02T15:04:05.000000Z"
