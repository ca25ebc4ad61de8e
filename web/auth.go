package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
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

const userKey ctxKey = 0

// currentUser is the signed-in user of a request that passed signedIn.
func currentUser(r *http.Request) *store.User {
	u, _ := r.Context().Value(userKey).(*store.User)
	return u
}

// signedIn lets signed-in users through and sends everyone else to the
// sign-in page.
func (s *Server) signedIn(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		id := s.sessions.GetInt64(r.Context(), sessionUser)
		if id == 0 {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		u, err := s.users.User(r.Context(), id)
		if errors.Is(err, store.ErrNotFound) {
			// The user was deleted while signed in.
			s.sessions.Remove(r.Context(), sessionUser)
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), userKey, u)), ps)
	}
}

// form reads a posted form: at most maxFormBytes (413 beyond), then the
// CSRF token, which must match the session's (403 page otherwise). Nothing
// runs before both pass.
func (s *Server) form(h httprouter.Handle) httprouter.Handle {
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
		want := s.sessions.GetString(r.Context(), sessionCSRF)
		got := r.PostForm.Get("csrf_token")
		if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
			s.errorPage(w, r, http.StatusForbidden)
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
// flash message, which is shown once.
func (s *Server) pageFor(r *http.Request, title string) templates.Page {
	p := templates.Page{Title: title, CSRF: s.csrfToken(r.Context()),
		Flash: s.sessions.PopString(r.Context(), sessionFlash)}
	if u := currentUser(r); u != nil {
		p.User = &templates.User{Name: u.Name, Admin: u.Role == runtime.RoleAdmin}
	}
	return p
}

// flash leaves a message for the next page the user sees.
func (s *Server) flash(ctx context.Context, msg string) {
	s.sessions.Put(ctx, sessionFlash, msg)
}

func (s *Server) loginForm(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.sessions.GetInt64(r.Context(), sessionUser) != 0 {
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, templates.Login(templates.LoginPage{Page: s.pageFor(r, "Sign in")}))
}

// login signs a user in. A wrong name and a wrong password get the same
// answer in the same time.
func (s *Server) login(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	name := strings.TrimSpace(r.PostForm.Get("username"))
	password := r.PostForm.Get("password")
	u, err := s.users.UserByName(r.Context(), name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.fail(w, r, err)
		return
	}
	hash := ""
	if u != nil {
		hash = u.PasswordHash
	}
	if !checkPassword(hash, password) || u == nil {
		s.render(w, r, http.StatusUnauthorized, templates.Login(templates.LoginPage{
			Page: s.pageFor(r, "Sign in"), Username: name, Error: "The name or the password is wrong."}))
		return
	}
	// A new session token at sign-in, so a token planted before cannot
	// ride along, and a new CSRF token with it.
	if err := s.sessions.RenewToken(r.Context()); err != nil {
		s.fail(w, r, err)
		return
	}
	s.sessions.Remove(r.Context(), sessionCSRF)
	s.sessions.Put(r.Context(), sessionUser, u.ID)
	http.Redirect(w, r, "/inbox", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if err := s.sessions.Destroy(r.Context()); err != nil {
		s.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
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
