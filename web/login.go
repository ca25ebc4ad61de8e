package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

const (
	// maxNameBytes: a longer name is refused before anything is counted
	// or looked up, so that no one can make the guard keep, or the
	// database compare, names of up to a form's 64 KiB.
	maxNameBytes = runtime.MaxUserNameBytes
	// loginCSRFCookie holds the sign-in form's CSRF token.
	loginCSRFCookie = "turnstile_login_csrf"
)

// clientAddr is the client a request comes from, as sign-in counts it —
// the one place that says so: the peer's address or, when the peer is a
// trusted proxy, the nearest address in X-Forwarded-For that is not one.
// An IPv4-mapped IPv6 address counts as the IPv4 address, and an IPv6
// address as its /64: a host or a customer usually holds a whole /64, and
// could otherwise take a fresh address for every attempt.
func (s *Server) clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if s.trusted(addr) {
		addr = s.forwardedClient(r, addr)
	}
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		p, _ := addr.Prefix(64)
		return p.String()
	}
	return addr.String()
}

// forwardedClient is the nearest address in X-Forwarded-For that is not a
// trusted proxy; peer, the trusted proxy the request came from, when there
// is none.
func (s *Server) forwardedClient(r *http.Request, peer netip.Addr) netip.Addr {
	addr := peer
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // a hop that is no address: trust nothing before it
		}
		if !s.trusted(hop) {
			return hop
		}
		addr = hop
	}
	return addr
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.trustedProxies {
		if p.Contains(a.Unmap()) {
			return true
		}
	}
	return false
}

func (s *Server) loginForm(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if s.sessions.GetInt64(r.Context(), sessionUser) != 0 {
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	s.renderLogin(w, r, http.StatusOK, "", "")
}

// renderLogin renders the sign-in form with its CSRF cookie.
func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, username, problem string) {
	page := s.pageFor(r, "Sign in")
	page.CSRF = s.loginCSRF(w, r)
	s.render(w, r, status, templates.Login(templates.LoginPage{Page: page, Username: username, Error: problem}))
}

// loginCSRF returns the sign-in form's CSRF token, setting its cookie when
// the browser holds none yet.
func (s *Server) loginCSRF(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(loginCSRFCookie); err == nil && len(c.Value) == 43 {
		return c.Value
	}
	b := make([]byte, 32)
	rand.Read(b)
	token := base64.RawURLEncoding.EncodeToString(b)
	http.SetCookie(w, &http.Cookie{Name: loginCSRFCookie, Value: token, Path: "/login", HttpOnly: true,
		Secure: s.sessions.Cookie.Secure, SameSite: http.SameSiteStrictMode})
	return token
}

// loginCSRFValid reports whether a sign-in POST carries its cookie's token.
func loginCSRFValid(r *http.Request) bool {
	c, err := r.Cookie(loginCSRFCookie)
	got := r.PostForm.Get("csrf_token")
	return err == nil && c.Value != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(got)) == 1
}

// login signs a user in. A wrong name and a wrong password get the same
// answer in the same time, and both count against the name, the address
// and the pair of them — from before the check on (see login_guard.go).
func (s *Server) login(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !loginCSRFValid(r) {
		s.errorPage(w, r, http.StatusForbidden)
		return
	}
	name := strings.TrimSpace(r.PostForm.Get("username"))
	password := r.PostForm.Get("password")
	if len(name) > maxNameBytes {
		s.renderLogin(w, r, http.StatusBadRequest, "",
			fmt.Sprintf("A user name is at most %d bytes; this one has %d. Check the name and sign in again.", maxNameBytes, len(name)))
		return
	}
	try, wait := s.guard.begin(name, s.clientAddr(r))
	if try == nil {
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		s.renderLogin(w, r, http.StatusTooManyRequests, name,
			fmt.Sprintf("Too many failed sign-ins for this name or from this address. Try again in %d seconds.", secs))
		return
	}
	defer try.abandon() // not checked after all, unless settled below
	u, err := s.users.UserByName(r.Context(), name)
	if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		s.refuse(w, r, s.at.page, 0, err)
		return
	}
	hash := ""
	if u != nil {
		hash = u.PasswordHash
	}
	release, free := try.turn(r.Context())
	if !free {
		w.Header().Set("Retry-After", "2")
		s.renderLogin(w, r, http.StatusServiceUnavailable, name, "The server is busy signing others in. Try again in a moment.")
		return
	}
	ok, stale := checkPassword(hash, password)
	release()
	if !ok || u == nil {
		try.failed()
		s.renderLogin(w, r, http.StatusUnauthorized, name, "The name or the password is wrong.")
		return
	}
	try.succeeded()
	if stale {
		// Made again with today's parameters; the old hash still works if
		// this fails, so it is only logged.
		if h, err := HashPassword(password); err != nil {
			s.log.Warn("rehash password", "user", u.ID, "err", err)
		} else if err := s.users.SetPassword(r.Context(), u.ID, h); err != nil {
			s.log.Warn("rehash password", "user", u.ID, "err", err)
		}
	}
	// The session starts here: a new token, so a token planted before
	// cannot ride along, and a new CSRF token with it.
	if err := s.sessions.RenewToken(r.Context()); err != nil {
		s.refuse(w, r, s.at.page, 0, err)
		return
	}
	s.sessions.Remove(r.Context(), sessionCSRF)
	s.sessions.Put(r.Context(), sessionUser, u.ID)
	// Cleared with the attributes it was set with (Secure among them).
	http.SetCookie(w, &http.Cookie{Name: loginCSRFCookie, Path: "/login", MaxAge: -1, HttpOnly: true,
		Secure: s.sessions.Cookie.Secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/inbox", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if err := s.sessions.Destroy(r.Context()); err != nil {
		s.refuse(w, r, s.at.page, 0, err)
		return
	}
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
