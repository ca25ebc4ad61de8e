package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/a-h/templ"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// The one place an error becomes an answer. Every refusal — the engine's,
// and the few of the web layer itself (a body too large, every continuation
// slot taken) — has a row here that says how each kind of surface answers
// it; refuse picks the row and answers as the surface says (a page, or
// JSON). Anything that is not a refusal is logged and answered 500 without
// its text.

// Codes of refusals the web layer makes itself.
const (
	// codeBusy says every continuation slot is taken and no worker could
	// take the decision instead. Nothing was claimed.
	codeBusy runtime.Code = "busy"
	// codeNotReady says the database node cannot answer for now (Galera's
	// 1047: it is outside the cluster's primary component). Whatever the
	// request did not get to write is not written; the same request a
	// moment later, or to an instance on another node, goes through.
	codeNotReady runtime.Code = "database_not_ready"
	// codeTooLarge says the body is over the route's size limit.
	codeTooLarge runtime.Code = "body_too_large"
	// codeInternal: anything that is not a refusal.
	codeInternal runtime.Code = "internal"
	// codeUnauthorized and codeInsufficientScope: the API's answers to a
	// caller it does not know, or whose token may not do this.
	codeUnauthorized      runtime.Code = "unauthorized"
	codeInsufficientScope runtime.Code = "insufficient_scope"
)

// answer is how a refusal is told. On a page: html is its status, and 303
// sends the user back (see surface.back) with flash; 422 lets a
// formSurface show its form again; anything else is the error page of
// that status. In JSON: api is the status. flash is a format of the run id
// and the refusal's message; "" shows the message itself.
type answer struct {
	html, api int
	flash     string
}

// answers is the table, for every code.
var answers = map[runtime.Code]answer{
	runtime.CodeNotFound:              {html: http.StatusNotFound, api: http.StatusNotFound},
	runtime.CodeNotWaiting:            {http.StatusSeeOther, http.StatusConflict, "Run %[1]d no longer waits for this decision."},
	runtime.CodeProcessRun:            {http.StatusSeeOther, http.StatusConflict, "Run %[1]d is decided by the process that started it, not in the inbox."},
	runtime.CodeInactiveConfiguration: {http.StatusSeeOther, http.StatusConflict, "The agent of run %[1]d is switched off; it cannot continue."},
	runtime.CodeFourEyes:              {http.StatusSeeOther, http.StatusForbidden, "Someone else has to approve run %[1]d; you may deny it."},
	runtime.CodeUnreadableState:       {http.StatusSeeOther, http.StatusInternalServerError, "The saved state of run %[1]d cannot be read; ask an admin."},
	runtime.CodeApproverNotPermitted:  {http.StatusSeeOther, http.StatusForbidden, "You may not decide run %[1]d: %[2]s."},
	runtime.CodeInvalidInput:          {html: http.StatusUnprocessableEntity, api: http.StatusUnprocessableEntity},
	runtime.CodeStaleTurn:             {http.StatusSeeOther, http.StatusConflict, "The pending action of run %[1]d changed; review it again."},
	runtime.CodeAlreadyResuming:       {http.StatusSeeOther, http.StatusConflict, "Run %[1]d is already being resumed."},
	runtime.CodeAlreadyVoted:          {http.StatusSeeOther, http.StatusConflict, "You already approved run %[1]d; it waits for other approvers."},
	runtime.CodeRunBusy:               {http.StatusSeeOther, http.StatusConflict, "Run %[1]d is still answering; send your message once its turn has ended."},
	runtime.CodeInvalidRequest:        {http.StatusSeeOther, http.StatusBadRequest, "Run %[1]d: %[2]s."},
	runtime.CodeNotSettled:            {http.StatusSeeOther, http.StatusConflict, "Run %[1]d has not settled: only a settled run can be erased."},
	codeInvalidBulk:                   {html: http.StatusBadRequest, api: http.StatusBadRequest},
	codeBusy:                          {html: http.StatusServiceUnavailable, api: http.StatusServiceUnavailable},
	codeNotReady:                      {html: http.StatusServiceUnavailable, api: http.StatusServiceUnavailable},
	codeTooLarge:                      {html: http.StatusRequestEntityTooLarge, api: http.StatusRequestEntityTooLarge},
	codeInternal:                      {html: http.StatusInternalServerError, api: http.StatusInternalServerError},
	codeUnauthorized:                  {html: http.StatusUnauthorized, api: http.StatusUnauthorized},
	codeInsufficientScope:             {html: http.StatusForbidden, api: http.StatusForbidden},
	runtime.CodeTooManyRequests:       {html: http.StatusTooManyRequests, api: http.StatusTooManyRequests},
	runtime.CodeCursorExpired:         {html: http.StatusGone, api: http.StatusGone},
	codeInvalidConfiguration:          {html: http.StatusUnprocessableEntity, api: http.StatusUnprocessableEntity},
	codeUnsupportedMediaType:          {html: http.StatusUnsupportedMediaType, api: http.StatusUnsupportedMediaType},
	codeAdminsOnly:                    {html: http.StatusForbidden, api: http.StatusForbidden},
}

// errBusy refuses a decision when every continuation slot is taken and no
// worker could carry it out instead (codeBusy).
var errBusy = &runtime.Refusal{Code: codeBusy, Message: "the server runs as many continuations as it may; try again in a few seconds"}

// errNotReady refuses a request the database node cannot answer for now
// (codeNotReady).
var errNotReady = &runtime.Refusal{Code: codeNotReady, Message: "the database is not ready; try again in a few seconds"}

// errTooLarge refuses a body over maxAPIBytes (codeTooLarge).
var errTooLarge = &runtime.Refusal{Code: codeTooLarge, Message: fmt.Sprintf("the body is larger than the %d bytes this API takes", maxAPIBytes)}

// refuse answers err on a surface, about run id (0 when the request names
// no run), as the table says.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, sf surface, id int64, err error) {
	var ref *runtime.Refusal
	// lines are the errors of a configuration file, each with its line.
	var lines []runtime.LineMessage
	var cfgErr *runtime.ConfigurationError
	switch {
	case errors.As(err, &cfgErr):
		lines = cfgErr.Lines
		ref = &runtime.Refusal{Code: codeInvalidConfiguration,
			Message: fmt.Sprintf("the configuration file has %d error(s); nothing was stored", len(lines))}
	case errors.As(err, &ref):
	case errors.Is(err, runtime.ErrNotFound):
		ref = &runtime.Refusal{Code: runtime.CodeNotFound, Message: fmt.Sprintf("no run %d", id)}
	case s.notReady(err):
		s.log.Warn("database node not ready (not in the cluster's primary component); answered 503, the client may try again",
			"method", r.Method, "path", r.URL.Path, "err", err)
		ref = errNotReady
	default:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		ref = &runtime.Refusal{Code: codeInternal, Message: "something went wrong on our side"}
	}
	row, ok := answers[ref.Code]
	if !ok {
		row = answers[runtime.CodeInvalidRequest]
	}
	if ref.Code != codeInternal && sf.name() != "" {
		s.metrics.Refused(sf.name(), string(ref.Code))
	}
	switch ref.Code {
	case codeBusy, codeNotReady:
		w.Header().Set("Retry-After", "5")
	case runtime.CodeTooManyRequests:
		// Nothing tells when one of the user's requests ends; a second is
		// short enough for a client that retries.
		w.Header().Set("Retry-After", "1")
	}
	if !sf.html(r) {
		e := map[string]any{"code": ref.Code, "message": ref.Message}
		if len(ref.Fields) > 0 {
			e["fields"] = ref.Fields
		}
		if len(lines) > 0 {
			e["fields"] = lines
		}
		if ref.Digest != "" {
			e["turn_digest"] = ref.Digest
		}
		body := map[string]any{"error": e}
		if ref.Decided != nil {
			body["decision"], body["status"] = decidedJSON(ref.Decided), ref.Decided.Status
		}
		s.writeJSON(w, row.api, body)
		return
	}
	form, isForm := sf.(formSurface)
	switch {
	case row.html == http.StatusUnprocessableEntity && isForm:
		form.invalid(w, r, id, ref)
	case row.html == http.StatusSeeOther:
		// A request about no run (a start) is told in the words of the
		// refusal itself; so is every refusal on a surface that says so.
		flash := sentence(ref.Message)
		if row.flash != "" && id != 0 && !sf.ownWords() {
			flash = fmt.Sprintf(row.flash, id, ref.Message)
		}
		if ref.Decided != nil {
			flash = decidedFlash(id, ref.Decided)
		}
		s.flash(r.Context(), flash)
		http.Redirect(w, r, sf.back(id), http.StatusSeeOther)
	case row.html == http.StatusBadRequest:
		// A malformed request a person can mend: its page says how.
		s.errorMessage(w, r, row.html, sentence(ref.Message))
	default:
		s.errorPage(w, r, row.html)
	}
}

// sentence makes a refusal's message a sentence for a flash.
func sentence(msg string) string {
	if msg == "" {
		return ""
	}
	msg = strings.ToUpper(msg[:1]) + msg[1:]
	if !strings.HasSuffix(msg, ".") {
		msg += "."
	}
	return msg
}

// errorTexts are the headings and messages of the error pages; a 500 never
// shows what went wrong inside.
var errorTexts = map[int][2]string{
	http.StatusBadRequest:            {"Bad request", "The form could not be read. Go back and try again."},
	http.StatusForbidden:             {"Forbidden", "This request was refused: it did not come from a Turnstile form of this site, or the form expired. Reload the page and try again."},
	http.StatusNotFound:              {"Not found", "There is nothing here, or nothing you may see."},
	http.StatusMethodNotAllowed:      {"Method not allowed", "This address does not take that kind of request."},
	http.StatusRequestEntityTooLarge: {"Too large", "What you sent is larger than this form takes."},
	http.StatusInternalServerError:   {"Something went wrong", "Something went wrong on our side. It has been logged; try again in a moment."},
	http.StatusServiceUnavailable:    {"Busy", "The server is busy. Try again in a moment."},
	http.StatusTooManyRequests:       {"Too many requests", "You have too many requests open at once. Wait for one of them to end, then try again."},
}

// errorPage renders the error page for a status.
func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, status int) {
	s.errorMessage(w, r, status, "")
}

// errorMessage renders the error page for a status with a message of its
// own, or the status's usual one when message is "".
func (s *Server) errorMessage(w http.ResponseWriter, r *http.Request, status int, message string) {
	t, ok := errorTexts[status]
	if !ok {
		t = [2]string{http.StatusText(status), ""}
	}
	if message != "" {
		t[1] = message
	}
	s.render(w, r, status, templates.Error(templates.ErrorPage{
		Page: s.pageFor(r, t[0]), Status: status, Heading: t[0], Message: t[1]}))
}

// render writes a component with a status. It renders into a buffer
// first, so a template error can still become a 500 page.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		s.log.Error("render", "path", r.URL.Path, "err", err)
		http.Error(w, "Something went wrong on our side.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	// Pages show run content to who may see it: no copy of one may stay in
	// a browser's or a proxy's cache for the next user of the machine.
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if _, err := buf.WriteTo(w); err != nil {
		s.log.Debug("write response", "err", err)
	}
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store") // run content, as on the pages
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		s.log.Debug("write response", "err", err)
	}
}
