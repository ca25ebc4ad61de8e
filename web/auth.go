package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// Session keys.
const (
	sessionUser  = "user_id"
	sessionCSRF  = "csrf"
	sessionFlash = "flash"
)

// maxFormBytes bounds every HTML form's body.
const maxFormBytes = 64 << 10

type ctxKey int

const (
	userKey ctxKey = iota
	actorKey
	// scopesKey holds the scopes of the API request's bearer token; a
	// session's request has none, and may do all its user may.
	scopesKey
)

// actorOf is who makes a request: the API's caller, or the signed-in user.
func actorOf(r *http.Request) runtime.Actor {
	if a, ok := r.Context().Value(actorKey).(runtime.Actor); ok {
		return a
	}
	if u := currentUser(r); u != nil {
		return u.Actor()
	}
	return runtime.Actor{}
}

// currentUser is the signed-in user of a request that passed signedIn.
func currentUser(r *http.Request) *runtime.User {
	u, _ := r.Context().Value(userKey).(*runtime.User)
	return u
}

// signedIn lets signed-in users through and sends everyone else to the
// sign-in page. A stream a page's script asks for counts against what its
// user may have open at once (admitUser), as the API's do: 429 beyond,
// before the form is read.
func (s *Server) signedIn(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		id := s.sessions.GetInt64(r.Context(), sessionUser)
		if id == 0 {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		u, err := s.users.User(r.Context(), id)
		if errors.Is(err, runtime.ErrNotFound) {
			// The user was deleted while signed in.
			s.sessions.Remove(r.Context(), sessionUser)
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if err != nil {
			s.refuse(w, r, s.at.page, 0, err)
			return
		}
		if wantsStream(r) {
			release, err := s.admitUser(r, u.ID, true)
			defer release()
			if err != nil {
				s.refuse(w, r, s.at.page, 0, err)
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), userKey, u)), ps)
	}
}

// form reads a posted form (see parsed), then its CSRF token, which must
// match the session's (403 page otherwise). Nothing runs before both pass.
func (s *Server) form(h httprouter.Handle) httprouter.Handle {
	return s.parsed(func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		want := s.sessions.GetString(r.Context(), sessionCSRF)
		got := r.PostForm.Get("csrf_token")
		if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
			s.errorPage(w, r, http.StatusForbidden)
			return
		}
		h(w, r, ps)
	})
}

// parsed reads a posted form: at most maxFormBytes (413 beyond), every
// name and value UTF-8 (400 otherwise).
func (s *Server) parsed(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				s.errorPage(w, r, http.StatusRequestEntityTooLarge)
				return
			}
			s.errorPage(w, r, http.StatusBadRequest)
			return
		}
		// Checked once here for every form, so that no handler, and no
		// MySQL column, ever sees bytes that are not text.
		if !validForm(r.Form) {
			s.errorMessage(w, r, http.StatusBadRequest, "The form holds text that is not valid UTF-8. Type it again and send it once more.")
			return
		}
		h(w, r, ps)
	}
}

// validForm reports whether every name and value of a form is UTF-8.
func validForm(form url.Values) bool {
	for k, vs := range form {
		if !utf8.ValidString(k) {
			return false
		}
		for _, v := range vs {
			if !utf8.ValidString(v) {
				return false
			}
		}
	}
	return true
}

// csrfToken returns the session's CSRF token, making one when the session
// has none.
func (s *Server) csrfToken(ctx context.Context) string {
	if t := s.sessions.GetString(ctx, sessionCSRF); t != "" {
		return t
	}
	b := make([]byte, 32)
	rand.Read(b)
	t := base64.RawURLEncoding.EncodeToString(b)
	s.sessions.Put(ctx, sessionCSRF, t)
	return t
}

// pageFor is the layout's view of a request: its user, CSRF token and the
// flash message, which is shown once. Only a signed-in user's page has a
// CSRF token: someone signed out has no session, and is given none just
// for seeing a page (the sign-in form has a token of its own).
func (s *Server) pageFor(r *http.Request, title string) templates.Page {
	p := templates.Page{Title: title, Flash: s.sessions.PopString(r.Context(), sessionFlash)}
	if u := currentUser(r); u != nil {
		p.CSRF = s.csrfToken(r.Context())
		p.User = &templates.User{Name: u.Name, Admin: u.Role == runtime.RoleAdmin}
	}
	return p
}

// flash leaves a message for the next page the user sees.
func (s *Server) flash(ctx context.Context, msg string) {
	s.sessions.Put(ctx, sessionFlash, msg)
}

// admin lets admins through; to everyone else the page does not exist.
func (s *Server) admin(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if currentUser(r).Role != runtime.RoleAdmin {
			s.errorPage(w, r, http.StatusNotFound)
			return
		}
		h(w, r, ps)
	}
}
