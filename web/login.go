package web

import (
	"context"
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
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// Sign-in is bounded three ways, so that no flood of attempts costs the
// server more than a few password checks' memory, and no name or address
// can be guessed at speed:
//
//   - at most maxPasswordChecks argon2id checks run at once in the
//     process; an attempt waits up to checkWait for one, then is told 503
//     with Retry-After;
//   - after nameThrottle.free failures for one user name (whether or not
//     the user exists, so the answer says nothing about that), and after
//     addrThrottle.free from one client address, each further attempt must
//     wait a delay that doubles with every failure (1 s, 2 s, … up to 5
//     min); an attempt before then is 429 with Retry-After and checks no
//     password. Failures are forgotten after failureWindow without one;
//   - before anyone signs in, no session is stored: the sign-in form's CSRF
//     token is a cookie of its own (double submit), and the session starts
//     with the successful POST.

const (
	// maxPasswordChecks is how many password checks run at once.
	maxPasswordChecks = 4
	// checkWait is how long an attempt waits for a free check.
	checkWait = 2 * time.Second
	// failureWindow: a name's or address's failures are forgotten after
	// this long without a new one.
	failureWindow = 15 * time.Minute
	// maxTracked bounds the names and addresses whose failures are kept;
	// beyond it the oldest are forgotten first.
	maxTracked = 10000
	// loginCSRFCookie holds the sign-in form's CSRF token.
	loginCSRFCookie = "turnstile_login_csrf"
)

// throttle says after how many failures of one kind the next attempt must
// wait, and how long that wait may grow.
type throttle struct {
	free int
	max  time.Duration
}

var (
	nameThrottle = throttle{free: 5, max: 5 * time.Minute}
	// Many people may share an address (an office, a proxy without
	// --trusted-proxies), so an address gets more failures free.
	addrThrottle = throttle{free: 20, max: 5 * time.Minute}
)

// loginGuard bounds sign-in attempts; see the top of this file. It is safe
// for concurrent use.
type loginGuard struct {
	checks chan struct{}
	wait   time.Duration
	now    func() time.Time

	mu       sync.Mutex
	failures map[string]*failures
}

// failures are one name's or address's failed attempts.
type failures struct {
	n     int
	last  time.Time
	until time.Time // no attempt before this
}

func newLoginGuard() *loginGuard {
	return &loginGuard{checks: make(chan struct{}, maxPasswordChecks), wait: checkWait, now: time.Now,
		failures: map[string]*failures{}}
}

// retryAfter is how long until every key may be tried again; 0 when they
// may be now.
func (g *loginGuard) retryAfter(keys ...string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	var wait time.Duration
	for _, k := range keys {
		if f := g.failures[k]; f != nil && now.Before(f.until) {
			wait = max(wait, f.until.Sub(now))
		}
	}
	return wait
}

// failed records a failed attempt for each key with its throttle.
func (g *loginGuard) failed(keys map[string]throttle) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	for k, th := range keys {
		f := g.failures[k]
		if f == nil || now.Sub(f.last) > failureWindow {
			if f == nil && len(g.failures) >= maxTracked {
				g.forgetOldest(now)
			}
			f = &failures{}
			g.failures[k] = f
		}
		f.n++
		f.last = now
		if over := f.n - th.free; over >= 0 {
			delay := th.max
			if over < 30 {
				delay = min(time.Duration(1<<over)*time.Second, th.max)
			}
			f.until = now.Add(delay)
		}
	}
}

// forgetOldest drops the failures that expired, or else the one whose
// last failure is oldest. g.mu is held.
func (g *loginGuard) forgetOldest(now time.Time) {
	oldest, at := "", now
	for k, f := range g.failures {
		if now.Sub(f.last) > failureWindow {
			delete(g.failures, k)
			continue
		}
		if f.last.Before(at) {
			oldest, at = k, f.last
		}
	}
	if len(g.failures) >= maxTracked {
		delete(g.failures, oldest)
	}
}

// succeeded forgets the failures of a key.
func (g *loginGuard) succeeded(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.failures, key)
}

// acquire takes one of the password checks, waiting up to g.wait; release
// gives it back. false when none came free in time.
func (g *loginGuard) acquire(ctx context.Context) (release func(), ok bool) {
	t := time.NewTimer(g.wait)
	defer t.Stop()
	select {
	case g.checks <- struct{}{}:
		return func() { <-g.checks }, true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}

func nameKey(name string) string { return "name:" + name }
func addrKey(addr string) string { return "addr:" + addr }

// clientAddr is the address a request comes from: the peer's, or, when the
// peer is a trusted proxy, the nearest address in X-Forwarded-For that is
// not one.
func (s *Server) clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil || !s.trusted(addr) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // a hop that is no address: trust nothing before it
		}
		if !s.trusted(hop) {
			return hop.String()
		}
		addr = hop
	}
	return addr.String()
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
// answer in the same time, and both count against the name and the
// address.
func (s *Server) login(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if !loginCSRFValid(r) {
		s.errorPage(w, r, http.StatusForbidden)
		return
	}
	name := strings.TrimSpace(r.PostForm.Get("username"))
	password := r.PostForm.Get("password")
	addr := s.clientAddr(r)
	if wait := s.guard.retryAfter(nameKey(name), addrKey(addr)); wait > 0 {
		secs := int(math.Ceil(wait.Seconds()))
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		s.renderLogin(w, r, http.StatusTooManyRequests, name,
			fmt.Sprintf("Too many failed sign-ins for this name or from this address. Try again in %d seconds.", secs))
		return
	}
	u, err := s.users.UserByName(r.Context(), name)
	if err != nil && !errors.Is(err, runtime.ErrNotFound) {
		s.refuse(w, r, s.at.page, 0, err)
		return
	}
	hash := ""
	if u != nil {
		hash = u.PasswordHash
	}
	release, free := s.guard.acquire(r.Context())
	if !free {
		w.Header().Set("Retry-After", "2")
		s.renderLogin(w, r, http.StatusServiceUnavailable, name, "The server is busy signing others in. Try again in a moment.")
		return
	}
	ok, stale := checkPassword(hash, password)
	release()
	if !ok || u == nil {
		s.guard.failed(map[string]throttle{nameKey(name): nameThrottle, addrKey(addr): addrThrottle})
		s.renderLogin(w, r, http.StatusUnauthorized, name, "The name or the password is wrong.")
		return
	}
	s.guard.succeeded(nameKey(name))
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
