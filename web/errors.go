package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/a-h/templ"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

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

// fail is the one place an error becomes an HTML answer: refusals that
// mean "not found" are a 404 page, every other unexpected error is logged
// and answered with a 500 page that shows nothing of it.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if runtime.CodeOf(err) == runtime.CodeNotFound || errors.Is(err, runtime.ErrNotFound) {
		s.errorPage(w, r, http.StatusNotFound)
		return
	}
	s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	s.errorPage(w, r, http.StatusInternalServerError)
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

func errorBody(code, message string) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": message}}
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store") // run content, as on the pages
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		s.log.Debug("write response", "err", err)
	}
}
