package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/templates"
)

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
		s.refuse(w, r, s.at.page, 0, err)
		return
	}
	page := templates.InboxPage{Page: s.pageFor(r, "Inbox"), Now: time.Now()}
	continuing, err := s.engine.Continuing(r.Context(), u.Actor())
	if err != nil {
		s.refuse(w, r, s.at.page, 0, err)
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
			CanOpen:  u.Actor().MayRead(p.Run.OwnerID)}
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

// inboxSurface answers decisions made in the inbox: refusals as a 303 to
// the inbox with a flash (a 422 inbox page for invalid input, the 404 page
// for a run the user may not see); with JavaScript (Accept:
// application/x-ndjson) the continuation streams counts only — an approve
// grant shows no content — and without, the durable path answers at once
// while a worker lives, else the continuation runs to its end and the
// outcome is the flash.
func (s *Server) inboxSurface() *surface {
	return &surface{name: "inbox",
		html: func(*http.Request) bool { return true },
		back: func(int64) string { return "/inbox" },
		invalid: func(w http.ResponseWriter, r *http.Request, id int64, ref *runtime.Refusal) {
			s.renderInbox(w, r, http.StatusUnprocessableEntity, &formState{runID: id, values: r.PostForm,
				fields: ref.Fields, msg: "Some fields need another look."})
		},
		want: func(r *http.Request) want {
			if wantsStream(r) {
				return wantStream
			}
			return wantAnswer
		},
		recorded: func(w http.ResponseWriter, r *http.Request, id int64) {
			s.flash(r.Context(), fmt.Sprintf("Decision recorded; run %d continues in the background.", id))
			http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		},
		run: func(w http.ResponseWriter, r *http.Request, c *runtime.Continuation) {
			if !wantsStream(r) {
				s.flash(r.Context(), outcomeFlash(runToEnd(w, r, c, nil)))
				http.Redirect(w, r, "/inbox", http.StatusSeeOther)
				return
			}
			s.streamProgress(w, r, c, func(out runtime.Outcome) {
				// The headers (and the session cookie) left long ago:
				// store the flash now, before "settled" sends the page to
				// /inbox to show it; on a context of its own, since the
				// client may have gone.
				ctx := context.WithoutCancel(r.Context())
				s.flash(ctx, outcomeFlash(out))
				if _, _, err := s.sessions.Commit(ctx); err != nil {
					s.log.Warn("save flash", "run", out.RunID, "err", err)
				}
			})
		},
	}
}

// decision approves or denies a pending turn from the inbox.
func (s *Server) decision(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.inbox, ps)
	if !ok {
		return
	}
	req := approvalForm(r, id)
	req.Inbox = true
	s.decide(w, r, s.at.inbox, id, s.approval(req))
}

// input answers an input turn from the inbox.
func (s *Server) input(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.inbox, ps)
	if !ok {
		return
	}
	s.decide(w, r, s.at.inbox, id, s.formAnswer(runtime.InputRequest{RunID: id, Digest: r.PostForm.Get("turn_digest"),
		Actor: currentUser(r).Actor(), Inbox: true}, r.PostForm))
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
