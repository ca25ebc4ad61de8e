// Package web is Turnstile's HTTP surface: routes, handlers, the NDJSON
// streamer, auth and the embedded static files. It talks to the engine and
// the store through the small interfaces it declares.
package web

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Engine is what the web layer asks of the agent engine.
type Engine interface {
	Decide(ctx context.Context, req runtime.DecideRequest) (*runtime.Continuation, error)
	DecideMany(ctx context.Context, reqs []runtime.DecideRequest, choose runtime.PathChooser) []runtime.Decided
	SubmitInput(ctx context.Context, req runtime.InputRequest) (*runtime.Continuation, error)
	Cancel(ctx context.Context, runID int64, actor runtime.Actor) (runtime.CancelResult, error)
	Erase(ctx context.Context, runID int64, actor runtime.Actor) (runtime.Erased, error)
	Pending(ctx context.Context, actor runtime.Actor, q runtime.WaitingQuery) (runtime.PendingPage, error)
	PendingOne(ctx context.Context, runID int64, actor runtime.Actor) (runtime.PendingRun, error)
	DecidedBy(ctx context.Context, runID int64, actor runtime.Actor) (runtime.DecidedRun, error)
	History(ctx context.Context, actor runtime.Actor, q runtime.RunQuery) (runtime.RunPage, error)
	Tool(name string) (runtime.Tool, bool)
	Detail(ctx context.Context, runID int64, actor runtime.Actor) (*runtime.RunDetail, error)
	Visible(ctx context.Context, runID int64, actor runtime.Actor) (*runtime.Run, *runtime.Configuration, error)
	Start(ctx context.Context, req runtime.StartRequest) (*runtime.Continuation, error)
	Enqueue(ctx context.Context, req runtime.StartRequest) (int64, error)
	SendMessage(ctx context.Context, req runtime.MessageRequest) (*runtime.Continuation, error)
	SetTitle(ctx context.Context, runID int64, actor runtime.Actor, title string) error
	QueueMessage(ctx context.Context, req runtime.MessageRequest) error
	Continuing(ctx context.Context, actor runtime.Actor) ([]runtime.ContinuingRun, error)
	Turn(ctx context.Context, runID int64) (*runtime.PendingTurn, error)
	Follow(ctx context.Context, runID int64, actor runtime.Actor, since time.Time, afterSeq int) (runtime.Followed, error)
	Conversation(ctx context.Context, runID int64, actor runtime.Actor, q runtime.MessageQuery) (runtime.ConversationPage, error)
	ConversationTurns(ctx context.Context, run *runtime.Run, cfg *runtime.Configuration, from, to int) ([]runtime.ConversationMessage, error)
}

// Catalog lists the configurations a run can be started with.
type Catalog interface {
	Configurations(ctx context.Context) ([]*runtime.Configuration, error)
}

// EventLog reads a run's stored events, for the event stream, and
// watches for new ones through the process's one feed (runtime.Watch).
type EventLog interface {
	Events(ctx context.Context, runID int64, afterSeq int) ([]runtime.Event, error)
	LastSeq(ctx context.Context, runID int64) (int, error)
	Watch(runID int64, afterSeq int) *runtime.Watch
	// WatchChanges attaches a client of the change feed (GET /api/feed),
	// and FeedCursor is where a page's script attaches it from.
	WatchChanges(ctx context.Context, after *runtime.FeedCursor) (*runtime.ChangeWatch, error)
	FeedCursor(ctx context.Context) (runtime.FeedCursor, error)
}

// Users is what sign-in needs of the store.
type Users interface {
	UserByName(ctx context.Context, name string) (*runtime.User, error)
	User(ctx context.Context, id int64) (*runtime.User, error)
	// SetPassword replaces a user's password hash: sign-in makes a hash
	// with older parameters again.
	SetPassword(ctx context.Context, id int64, hash string) error
}

// Tokens is what the JSON API's bearer authentication needs of the store.
type Tokens interface {
	// Authenticate returns the user a token acts as and its scopes, or an
	// error wrapping runtime.ErrTokenInvalid for a token that is malformed,
	// unknown, expired or revoked.
	Authenticate(ctx context.Context, plain string) (*runtime.User, []string, error)
}

// Metrics is what the web layer tells of what it does, and serves at GET
// /metrics.
type Metrics interface {
	http.Handler
	// Refused counts a refusal on a surface, by its code.
	Refused(surface, code string)
	// LineCounter returns what counts one stream line of a type.
	LineCounter(typ string) func()
}

// Readiness is what /readyz asks: the database answers and every migration
// is applied.
type Readiness interface {
	Ready(ctx context.Context) error
}

// Deps are the server's dependencies.
type Deps struct {
	Logger *slog.Logger
	Ready  Readiness
	Engine Engine
	Users  Users
	Tokens Tokens // bearer tokens of the JSON API; nil refuses every one
	// Credentials answer introspection; nil answers every credential
	// inactive.
	Credentials Credentials
	Catalog     Catalog
	// Agents serve /api/agents (web/agents.go); nil answers 404 there.
	Agents   Agents
	Events   EventLog
	Sessions *scs.SessionManager
	// Keepalive is the longest a stream stays silent; DefaultKeepalive
	// when zero.
	Keepalive time.Duration
	// WriteTimeout is how long one stream line may take to write; every
	// line extends the server's write deadline by it.
	WriteTimeout time.Duration
	// DecisionPath is auto (default), request or durable; see paths.choose.
	DecisionPath string
	// MaxContinuations bounds the continuations running inside requests
	// (512 when zero).
	MaxContinuations int
	// MaxUserRequests and MaxUserStreams bound the API requests, and apart
	// from them the streams, one user may have open at once in this process
	// (see userlimits.go): DefaultMaxUserRequests and DefaultMaxUserStreams
	// when zero, no bound when negative.
	MaxUserRequests, MaxUserStreams int
	// Workers tells whether a worker is alive to take durable decisions.
	Workers WorkerCheck
	// Metrics are served at GET /metrics and count what the server does;
	// without them there is no /metrics route and nothing is counted.
	Metrics Metrics
	// TrustedProxies are the peers whose X-Forwarded-For names the client
	// (--trusted-proxies), for counting failed sign-ins per address.
	TrustedProxies []netip.Prefix
	// Webhooks shows admins a run's failed notifications on its page;
	// nil shows none.
	Webhooks Webhooks
	// NotReady tells an error of a database that cannot answer for a
	// moment (a cluster node outside the primary component): the request
	// is then answered 503 with Retry-After, not 500. Nil: none is.
	NotReady func(error) bool
	// StrictTransportSecurity sends Strict-Transport-Security on every
	// answer: the server is reached over HTTPS (an https --public-url, or
	// --secure-cookies).
	StrictTransportSecurity bool
}

// DefaultKeepalive is the default --keepalive.
const DefaultKeepalive = 10 * time.Second

// Server holds the handlers' dependencies.
type Server struct {
	log          *slog.Logger
	ready        Readiness
	engine       Engine
	users        Users
	tokens       Tokens
	credentials  Credentials
	catalog      Catalog
	agents       Agents
	events       EventLog
	sessions     *scs.SessionManager
	keepalive    time.Duration
	writeTimeout time.Duration
	admission    *admission
	metrics      Metrics
	lines        map[string]func() // counts the stream lines of each type
	// at are the surfaces requests come from: how each is answered.
	at struct {
		inbox      inboxSurface
		playground playgroundSurface
		api        apiSurface
		page       pageSurface
		// history: a bad filter of the history goes back to it, in its
		// words.
		history pageSurface
	}
	guard *loginGuard
	// userLimits count what each user has open (see userlimits.go).
	userLimits *userLimits
	// trustedProxies are the peers whose X-Forwarded-For names the client
	// (Deps.TrustedProxies).
	trustedProxies []netip.Prefix
	webhooks       Webhooks
	notReady       func(error) bool
	hsts           bool
	feedLines      feedLineCache
}

// New returns a server.
func New(d Deps) *Server {
	s := &Server{log: d.Logger, ready: d.Ready, engine: d.Engine, users: d.Users, tokens: d.Tokens, credentials: d.Credentials, catalog: d.Catalog, agents: d.Agents, events: d.Events, sessions: d.Sessions,
		keepalive: d.Keepalive, writeTimeout: d.WriteTimeout,
		admission: newAdmission(d.DecisionPath, d.MaxContinuations, d.Workers), metrics: d.Metrics,
		guard: newLoginGuard(), userLimits: newUserLimits(d.MaxUserRequests, d.MaxUserStreams), trustedProxies: d.TrustedProxies,
		webhooks: d.Webhooks, notReady: d.NotReady, hsts: d.StrictTransportSecurity}
	if s.keepalive <= 0 {
		s.keepalive = DefaultKeepalive
	}
	if s.writeTimeout <= 0 {
		s.writeTimeout = 30 * time.Second
	}
	s.at.inbox, s.at.playground, s.at.api = inboxSurface{s}, playgroundSurface{s}, apiSurface{s}
	s.at.history = pageSurface{history: true}
	if s.agents == nil {
		s.agents = noAgents{}
	}
	if s.metrics == nil {
		s.metrics = noMetrics{}
	}
	if s.notReady == nil {
		s.notReady = func(error) bool { return false }
	}
	s.lines = make(map[string]func(), len(lineTypes))
	for _, t := range lineTypes {
		s.lines[t] = s.metrics.LineCounter(t)
	}
	return s
}

// Handler returns every route behind the middleware: cross-origin
// protection for every unsafe request, then the session.
func (s *Server) Handler() http.Handler {
	r := httprouter.New()
	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	if _, none := s.metrics.(noMetrics); !none {
		// Without authentication, like /healthz: keep it off the public
		// internet (see README.md).
		r.Handler(http.MethodGet, "/metrics", s.metrics)
	}
	r.Handler(http.MethodGet, "/static/*filepath", staticFiles())

	r.GET("/", func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
	})
	r.GET("/login", s.loginForm)
	r.POST("/login", s.parsed(s.login))
	r.POST("/logout", s.signedIn(s.form(s.logout)))
	r.GET("/inbox", s.signedIn(s.inbox))
	r.GET("/inbox/continuing", s.signedIn(s.continuingList))
	r.GET("/inbox/runs/:id", s.signedIn(s.inboxRunPage))
	r.GET("/inbox/cards/:id", s.signedIn(s.inboxCard))
	r.POST("/inbox/runs/:id/decision", s.signedIn(s.form(s.decision)))
	r.POST("/inbox/runs/:id/input", s.signedIn(s.form(s.input)))
	r.POST("/inbox/decisions", s.signedIn(s.form(s.inboxBulk)))
	r.GET("/runs", s.signedIn(s.history))
	r.GET("/runs/:id", s.signedIn(s.run))
	r.POST("/runs/:id/cancel", s.signedIn(s.form(s.cancel)))
	r.POST("/runs/:id/messages", s.signedIn(s.form(s.pageMessage)))
	r.GET("/runs/:id/erase", s.signedIn(s.eraseConfirm))
	r.POST("/runs/:id/erase", s.signedIn(s.form(s.erase)))

	r.GET("/playground", s.signedIn(s.admin(s.playground)))
	r.POST("/playground/runs", s.signedIn(s.form(s.admin(s.playgroundStart))))
	r.POST("/playground/runs/:id/resume", s.signedIn(s.form(s.admin(s.playgroundResume))))
	r.POST("/playground/runs/:id/input", s.signedIn(s.form(s.admin(s.playgroundInput))))

	r.GET("/api/openapi.json", s.openAPI)
	r.GET("/api/approvals", s.api(runtime.ScopeRunRead, s.apiApprovals))
	r.POST("/api/runs", s.api(runtime.ScopeRunStart, s.apiStartRun))
	r.GET("/api/runs", s.api(runtime.ScopeRunRead, s.apiRuns))
	r.GET("/api/runs/:id", s.api(runtime.ScopeRunRead, s.apiRun))
	r.PATCH("/api/runs/:id", s.api(runtime.ScopeRunStart, s.apiSetTitle))
	r.DELETE("/api/runs/:id", s.api(runtime.ScopeRunCancel, s.apiDeleteRun))
	r.GET("/api/runs/:id/events", s.apiStream(runtime.ScopeRunRead, s.apiEvents))
	r.POST("/api/runs/:id/messages", s.api(runtime.ScopeRunStart, s.apiMessage))
	r.GET("/api/runs/:id/messages", s.api(runtime.ScopeRunRead, s.apiMessages))
	r.GET("/api/feed", s.apiStream(runtime.ScopeRunRead+" "+runtime.ScopeRunDecide, s.apiFeed))
	r.POST("/api/runs/:id/decisions", s.api(runtime.ScopeRunDecide, s.apiDecide))
	r.POST("/api/runs/:id/input", s.api(runtime.ScopeRunDecide, s.apiInput))
	r.POST("/api/decisions", s.api(runtime.ScopeRunDecide, s.apiBulk))
	r.GET("/api/agents", s.api(anyScope, s.apiAgents))
	r.POST("/api/identity/introspect", s.api(runtime.ScopeIdentityIntrospect, s.apiIntrospect))
	r.PUT("/api/agents/:identifier", s.api(runtime.ScopeAgentsWrite, s.adminAgent(s.apiPutAgent)))
	r.GET("/api/agents/:identifier", s.api(runtime.ScopeAgentsWrite, s.adminAgent(s.apiGetAgent)))
	r.DELETE("/api/agents/:identifier", s.api(runtime.ScopeAgentsWrite, s.adminAgent(s.apiDeleteAgent)))

	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			s.refuse(w, r, s.at.api, 0, &runtime.Refusal{Code: runtime.CodeNotFound, Message: "no such API route; see /api/openapi.json"})
			return
		}
		s.errorPage(w, r, http.StatusNotFound)
	})
	r.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.errorPage(w, r, http.StatusMethodNotAllowed)
	})
	r.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		s.log.Error("panic", "method", r.Method, "path", r.URL.Path, "panic", v)
		s.errorPage(w, r, http.StatusInternalServerError)
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.errorPage(w, r, http.StatusForbidden)
	}))
	// The session loads first, so that even a refused cross-origin request
	// gets a rendered page.
	return secureHeaders(s.sessions.LoadAndSave(cop.Handler(r)), s.hsts)
}

// contentSecurityPolicy allows the pages' own files and nothing else: no
// inline script or style (every script and style is a file under
// /static/), no framing, forms posted only here.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// strictTransportSecurity keeps browsers on HTTPS for a year after a
// visit. No includeSubDomains or preload: whether every subdomain serves
// HTTPS is the domain owner's choice, not Turnstile's.
const strictTransportSecurity = "max-age=31536000"

// secureHeaders sets on every response what a browser should enforce for
// this site; they cost a JSON client nothing. hsts adds
// Strict-Transport-Security (browsers ignore it over plain HTTP).
func secureHeaders(next http.Handler, hsts bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if hsts {
			h.Set("Strict-Transport-Security", strictTransportSecurity)
		}
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY") // frame-ancestors for older browsers
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// healthz answers while the process serves, whatever the database does.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only when the database answers and is migrated, so a
// load balancer sends no traffic to an instance that cannot decide.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if err := s.ready.Ready(r.Context()); err != nil {
		s.log.Warn("not ready", "err", err)
		s.writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]string{
			"code": "not_ready", "message": "the database is not reachable or not migrated"}})
		return
	}
	s.writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// SlotsInUse is how many continuations run inside requests now.
func (s *Server) SlotsInUse() int { return s.admission.SlotsInUse() }

// SlotsTotal is how many may (--max-continuations).
func (s *Server) SlotsTotal() int { return s.admission.SlotsTotal() }

// noMetrics counts nothing, for a server without metrics.
type noMetrics struct{ http.Handler }

func (noMetrics) Refused(string, string)    {}
func (noMetrics) LineCounter(string) func() { return func() {} }
