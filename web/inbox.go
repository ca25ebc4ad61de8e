package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/templates"
)

// runID reads the :id of a route; a malformed one is no run at all. Only
// the canonical form names a run: "+5" and "05" are not run 5, so one run
// has one address.
func runID(ps httprouter.Params) (int64, bool) {
	s := ps.ByName("id")
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0 && strconv.FormatInt(id, 10) == s
}

func (s *Server) inbox(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	s.renderInbox(w, r, http.StatusOK, nil)
}

// formState is a refused input form to show again: the user's values and
// one message per field.
type formState struct {
	runID  int64
	values map[string][]string
	fields map[string]string
	msg    string
}

// renderInbox renders the inbox, with a refused input form filled in again
// when there is one.
func (s *Server) renderInbox(w http.ResponseWriter, r *http.Request, status int, refused *formState) {
	u := currentUser(r)
	pending, err := s.engine.Pending(r.Context(), u.Actor(), false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	page := templates.InboxPage{Page: s.pageFor(r, "Inbox"), Now: time.Now()}
	continuing, err := s.engine.Continuing(r.Context(), u.Actor())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	for _, c := range continuing {
		page.Continuing = append(page.Continuing, templates.ContinuingRun{ID: c.Run.ID,
			Configuration: c.Configuration.Name, Status: string(c.Run.Status)})
	}
	if len(page.Continuing) > 0 {
		page.Refresh = 3
	}
	for _, p := range pending {
		run := templates.InboxRun{ID: p.Run.ID, Configuration: p.Configuration.Name, Kind: p.Turn.Kind,
			Digest: p.Run.TurnDigest, Note: p.Turn.Note,
			FourEyes: p.Configuration.RequireSecondApprover && p.Run.OwnerID == u.ID,
			CanOpen:  u.Role == runtime.RoleAdmin || p.Run.OwnerID == u.ID}
		if p.Run.WaitingSince != nil {
			run.WaitingSince = *p.Run.WaitingSince
		}
		for _, c := range p.Turn.Calls {
			run.Calls = append(run.Calls, templates.Call{ID: c.ID, Name: c.Name, Arguments: indent(c.Arguments)})
		}
		if p.Turn.Kind == runtime.TurnInput {
			var values map[string][]string
			var errs map[string]string
			if refused != nil && refused.runID == p.Run.ID {
				values, errs, run.Error = refused.values, refused.fields, refused.msg
			}
			run.Fields = inputFields(p.Turn.Schema, values, errs)
		}
		page.Runs = append(page.Runs, run)
	}
	s.render(w, r, status, templates.Inbox(page))
}

// inputFields turns an input schema into form fields, with the values and
// errors of a refused submission.
func inputFields(sch json.RawMessage, values map[string][]string, errs map[string]string) []templates.Field {
	fields, err := schema.Fields(sch)
	if err != nil {
		return nil
	}
	out := make([]templates.Field, len(fields))
	for i, f := range fields {
		out[i] = templates.Field{Name: f.Name, Label: f.Title, Description: f.Description, Type: f.Type,
			Enum: f.Enum, Required: f.Required, Min: f.Minimum, Max: f.Maximum, Error: errs[f.Name]}
		if v := values[f.Name]; len(v) > 0 {
			out[i].Value = v[0]
		}
	}
	return out
}

func indent(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// decision approves or denies a pending turn from the inbox.
func (s *Server) decision(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := runID(ps)
	if !ok {
		s.errorPage(w, r, http.StatusNotFound)
		return
	}
	path, release, ok := s.inboxPath(w, r)
	if !ok {
		return
	}
	defer release()
	c, err := s.engine.Decide(r.Context(), runtime.DecideRequest{RunID: id, Digest: r.PostForm.Get("turn_digest"),
		Decision: r.PostForm.Get("decision"), Scope: r.PostForm.Get("scope"), Reason: r.PostForm.Get("reason"),
		Actor: currentUser(r).Actor(), Path: path, Inbox: true})
	if err != nil {
		s.inboxRefusal(w, r, id, err, nil)
		return
	}
	s.continueRun(w, r, id, c)
}

// inboxPath chooses the path of an inbox decision (see paths.choose); with
// every slot taken and no worker alive it answers 503 with Retry-After,
// before anything is claimed.
func (s *Server) inboxPath(w http.ResponseWriter, r *http.Request) (string, func(), bool) {
	path, release, err := s.paths.choose(r.Context(), wantsStream(r))
	if errors.Is(err, errBusy) {
		s.metrics.refused(surfaceInbox, codeBusy)
		w.Header().Set("Retry-After", "5")
		s.errorPage(w, r, http.StatusServiceUnavailable)
		return "", release, false
	}
	return path, release, true
}

// input answers an input turn from the inbox.
func (s *Server) input(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := runID(ps)
	if !ok {
		s.errorPage(w, r, http.StatusNotFound)
		return
	}
	answer, fieldErrs, err := s.answer(r.Context(), id, r.PostForm)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	path, release, ok := s.inboxPath(w, r)
	if !ok {
		return
	}
	defer release()
	c, err := s.engine.SubmitInput(r.Context(), runtime.InputRequest{RunID: id, Digest: r.PostForm.Get("turn_digest"),
		Input: answer, FormErrors: fieldErrs, Actor: currentUser(r).Actor(), Path: path, Inbox: true})
	if err != nil {
		s.inboxRefusal(w, r, id, err, r.PostForm)
		return
	}
	s.continueRun(w, r, id, c)
}

// answer turns a posted input form into JSON by the schema of the turn it
// answers. Fields that do not parse come back as errors; when the run does
// not wait for input the answer is empty, and the pipeline refuses it.
func (s *Server) answer(ctx context.Context, id int64, form map[string][]string) (json.RawMessage, map[string]string, error) {
	turn, err := s.engine.Turn(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if turn == nil || turn.Kind != runtime.TurnInput {
		return json.RawMessage(`{}`), nil, nil
	}
	answer, fields := schema.FromForm(turn.Schema, form)
	return answer, fields, nil
}

// refusalFlash is what the inbox tells a user whose decision was refused.
func refusalFlash(id int64, r *runtime.Refusal) string {
	switch r.Code {
	case runtime.CodeNotWaiting:
		return fmt.Sprintf("Run %d no longer waits for this decision.", id)
	case runtime.CodeProcessRun:
		return fmt.Sprintf("Run %d is decided by the process that started it, not in the inbox.", id)
	case runtime.CodeInactiveConfiguration:
		return fmt.Sprintf("The agent of run %d is switched off; it cannot continue.", id)
	case runtime.CodeFourEyes:
		return fmt.Sprintf("Someone else has to approve run %d; you may deny it.", id)
	case runtime.CodeUnreadableState:
		return fmt.Sprintf("The saved state of run %d cannot be read; ask an admin.", id)
	case runtime.CodeApproverNotPermitted:
		return fmt.Sprintf("You may not approve run %d: %s.", id, r.Message)
	case runtime.CodeStaleTurn:
		return fmt.Sprintf("The pending action of run %d changed; review it again.", id)
	case runtime.CodeAlreadyResuming:
		return fmt.Sprintf("Run %d is already being resumed.", id)
	default:
		return fmt.Sprintf("Run %d: %s.", id, r.Message)
	}
}

// inboxRefusal answers a refused decision as SPEC §4 says: a 404 page for
// an unknown run, the inbox again with 422 for invalid input, and a 303 to
// the inbox with a flash for everything else. The stream never started,
// so a script gets these same answers.
func (s *Server) inboxRefusal(w http.ResponseWriter, r *http.Request, id int64, err error, form map[string][]string) {
	var ref *runtime.Refusal
	if !errors.As(err, &ref) {
		s.fail(w, r, err)
		return
	}
	s.metrics.refused(surfaceInbox, string(ref.Code))
	if ref.Code == runtime.CodeNotFound {
		s.fail(w, r, err)
		return
	}
	if ref.Code == runtime.CodeInvalidInput {
		s.renderInbox(w, r, http.StatusUnprocessableEntity, &formState{runID: id, values: form,
			fields: ref.Fields, msg: "Some fields need another look."})
		return
	}
	s.flash(r.Context(), refusalFlash(id, ref))
	http.Redirect(w, r, "/inbox", http.StatusSeeOther)
}

// outcomeFlash names how a continuation ended.
func outcomeFlash(out runtime.Outcome) string {
	switch {
	case out.Status == runtime.StatusCompleted:
		return fmt.Sprintf("Run %d completed.", out.RunID)
	case out.Status.Waiting():
		return fmt.Sprintf("Run %d continued and waits for a decision again.", out.RunID)
	case out.Status == runtime.StatusFailed:
		return fmt.Sprintf("Run %d failed (%s).", out.RunID, out.Reason)
	case out.Status == runtime.StatusCancelled:
		return fmt.Sprintf("Run %d was cancelled.", out.RunID)
	case out.Status == runtime.StatusDecided || out.Status == runtime.StatusQueued:
		return fmt.Sprintf("Run %d was handed over to a worker while this server stops; it continues in the background.", out.RunID)
	default:
		return fmt.Sprintf("Run %d continues in the background.", out.RunID)
	}
}

// continueRun runs a claimed continuation inside the request: streamed as
// NDJSON progress when the client asks for it, else to its end and then a
// 303 with the outcome as the flash. Either way the run goes on to its end
// if the client goes away.
func (s *Server) continueRun(w http.ResponseWriter, r *http.Request, id int64, c *runtime.Continuation) {
	ctx := context.WithoutCancel(r.Context())
	if c == nil {
		// The durable path: the decision is recorded, a worker runs it.
		s.flash(ctx, fmt.Sprintf("Decision recorded; run %d continues in the background.", id))
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	if !wantsStream(r) {
		// The answer comes only when the run pauses or settles, which may
		// take longer than the server's write timeout allows.
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
		out := c.Run(ctx, nil)
		s.flash(ctx, outcomeFlash(out))
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	st := s.startStream(w)
	var steps atomic.Int64
	st.send(lineProgress, progressLine{Type: "progress", Steps: 0})
	stop := st.keepalives(s.keepalive, func() any { return progressLine{Type: "keepalive", Steps: steps.Load()} })
	defer stop() // also when the continuation panics: no keepalive may follow the handler
	out := c.Run(ctx, runtime.ObserverFunc(func(runtime.Step) {
		st.send(lineProgress, progressLine{Type: "progress", Steps: steps.Add(1)})
	}))
	stop()
	// The headers (and the session cookie) left long ago: store the flash
	// now, before "settled" sends the page to /inbox to show it.
	s.flash(ctx, outcomeFlash(out))
	if _, _, err := s.sessions.Commit(ctx); err != nil {
		s.log.Warn("save flash", "run", out.RunID, "err", err)
	}
	st.send(lineSettled, settledLine{Type: "settled"})
}

// progressLine counts steps, and nothing else: an approve grant may not
// show a run's content.
type progressLine struct {
	Type  string `json:"type"`
	Steps int64  `json:"steps"`
}

type settledLine struct {
	Type string `json:"type"`
}
