package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// The identity of an MCP server entry: whether Turnstile sends it a
// credential of the run's owner.
const (
	IdentityNone    = "none"
	IdentityForward = "forward"
)

// Run credential lifetimes: identity_ttl's default and its least value.
const (
	DefaultIdentityTTL = 2 * time.Hour
	MinIdentityTTL     = time.Minute
)

// ScopeIdentityIntrospect lets a token ask who a run credential acts for
// (POST /api/identity/introspect): what an internal MCP server holds.
const ScopeIdentityIntrospect = "identity:introspect"

// RunIdentity is who a live run credential acts for.
type RunIdentity struct {
	User          User
	RunID         int64
	Configuration string
	ExpiresAt     time.Time
}

// CredentialStore keeps run credentials, of which only a hash is stored.
// A run has at most one live credential: minting replaces the last.
type CredentialStore interface {
	// MintRunToken returns a new credential ("tsr_" and 64 hex digits) of
	// the run and its owner, valid for ttl while the run runs under the
	// claim claimedBy — pausing or settling it, or another holder's claim,
	// revokes it —, and makes the run's last one inactive.
	MintRunToken(ctx context.Context, runID, ownerID int64, claimedBy string, ttl time.Duration) (string, error)
	// SlideRunTokens gives the live credentials of runs their lifetime
	// again, from now, in one statement.
	SlideRunTokens(ctx context.Context, runIDs []int64) error
	// IntrospectRunToken is ErrTokenInvalid for any credential that is not
	// live, malformed ones included.
	IntrospectRunToken(ctx context.Context, token string) (*RunIdentity, error)
}

// RunCredential is the credential a continuation presents to the MCP
// servers of its configuration with identity: forward. It is minted when
// the continuation starts, slid by the lease keeper while the
// continuation holds the run, minted again when a server refuses it, and
// revoked when the continuation ends: by the commit that pauses or
// settles the run, or by another holder's claim. It is safe for
// concurrent use.
type RunCredential struct {
	store   CredentialStore
	runID   int64
	ownerID int64
	claim   string // the claim it acts under
	ttl     time.Duration
	every   time.Duration // how often it slides while held

	mu      sync.Mutex
	token   string
	slideAt time.Time // when the lease keeper next slides it
	ended   bool
	onEnd   []func()
}

type credentialKey struct{}

// CredentialFrom returns the run credential a ToolSource's Tools is
// called with, or nil when the run has none (no server forwards, or
// minting failed).
func CredentialFrom(ctx context.Context) *RunCredential {
	c, _ := ctx.Value(credentialKey{}).(*RunCredential)
	return c
}

// MintFailed reports whether ctx is a continuation's whose credential
// could not be minted: its forwarding servers are unavailable to it. A
// context that is no continuation's (a decision checking an edited call)
// has no credential without that.
func MintFailed(ctx context.Context) bool {
	c, ok := ctx.Value(credentialKey{}).(*RunCredential)
	return ok && c == nil
}

// WithCredential returns ctx carrying c, as a continuation calls its
// ToolSource (c nil when minting failed); for tests of a ToolSource too.
func WithCredential(ctx context.Context, c *RunCredential) context.Context {
	return context.WithValue(ctx, credentialKey{}, c)
}

// MintCredential mints a run's first credential, which slides every
// max(60s, ttl/2) while held, or every slide when that is set (tests).
func MintCredential(ctx context.Context, s CredentialStore, run *Run, ttl, slide time.Duration) (*RunCredential, error) {
	tok, err := s.MintRunToken(ctx, run.ID, run.OwnerID, run.ClaimedBy, ttl)
	if err != nil {
		return nil, err
	}
	return newRunCredential(s, run, ttl, slide, tok), nil
}

// newRunCredential is the credential tok of run, minted already.
func newRunCredential(s CredentialStore, run *Run, ttl, slide time.Duration, tok string) *RunCredential {
	if slide <= 0 {
		slide = max(time.Minute, ttl/2)
	}
	return &RunCredential{store: s, runID: run.ID, ownerID: run.OwnerID, claim: run.ClaimedBy, ttl: ttl, every: slide,
		token: tok, slideAt: time.Now().Add(slide)}
}

// NewRunToken is a new run credential as sent: "tsr_" and 64 hex digits
// of crypto/rand.
func NewRunToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "tsr_" + hex.EncodeToString(b)
}

// CredentialMint is a credential that the commit starting a continuation
// in a request mints with it — a decision's claim (if it wins), a start,
// a follow-up's turn: one statement more in that commit, rather than a
// commit of its own when the continuation starts. Its holder is the
// commit's claim.
type CredentialMint struct {
	Token   string
	OwnerID int64
	TTL     time.Duration
}

// minted gives the continuation the credential m that the commit which
// started it minted (none when m is nil: it mints its own, if any).
func (c *Continuation) minted(m *CredentialMint) {
	if m != nil {
		c.cred.Store(newRunCredential(c.e.credentials, c.run, m.TTL, c.e.identitySlide, m.Token))
	}
}

// credentialMint is what a commit starting a continuation of run under
// cfg mints: nothing unless one of its MCP servers forwards the owner's
// identity.
func (e *Engine) credentialMint(run *Run, cfg *Configuration) *CredentialMint {
	if e.credentials == nil || cfg == nil || !cfg.Forwards() {
		return nil
	}
	return &CredentialMint{Token: NewRunToken(), OwnerID: run.OwnerID, TTL: cfg.IdentityLifetime()}
}

// Bearer is the credential as sent: "tsr_…". Never log it.
func (c *RunCredential) Bearer() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// Renew mints a new credential in place of refused, the one a server
// answered 401 to. When another call renewed it already, it keeps that
// one. An error when the continuation ended or the database failed.
func (c *RunCredential) Renew(ctx context.Context, refused string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return fmt.Errorf("runtime: run %d: the continuation ended; its credential is revoked", c.runID)
	}
	if c.token != refused {
		return nil
	}
	tok, err := c.store.MintRunToken(ctx, c.runID, c.ownerID, c.claim, c.ttl)
	if err != nil {
		return err
	}
	c.token, c.slideAt = tok, time.Now().Add(c.every)
	return nil
}

// OnEnd registers f to run when the credential is revoked: a source
// closes the sessions it opened with it.
func (c *RunCredential) OnEnd(f func()) {
	c.mu.Lock()
	ended := c.ended
	if !ended {
		c.onEnd = append(c.onEnd, f)
	}
	c.mu.Unlock()
	if ended {
		f()
	}
}

// end stops the credential's use in this process and runs what OnEnd
// registered. The store revoked it already, with the run's last commit.
func (c *RunCredential) end() {
	c.mu.Lock()
	c.ended = true
	fs := c.onEnd
	c.onEnd = nil
	c.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// due reports whether the credential should slide now, and moves its
// next slide on if so.
func (c *RunCredential) due(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || now.Before(c.slideAt) {
		return false
	}
	c.slideAt = now.Add(c.every)
	return true
}

// Forwards reports whether some MCP server of the configuration is sent
// the run's credential.
func (c *Configuration) Forwards() bool {
	for _, s := range c.MCPServers {
		if s.Identity == IdentityForward {
			return true
		}
	}
	return false
}

// IdentityLifetime is the configuration's identity_ttl, or its default.
// Normalize has checked it.
func (c *Configuration) IdentityLifetime() time.Duration {
	if d, err := time.ParseDuration(c.IdentityTTL); err == nil && d > 0 {
		return d
	}
	return DefaultIdentityTTL
}

// startCredential mints the continuation's credential when its
// configuration forwards one, and returns ctx carrying it for the
// ToolSource. When minting fails, the forwarding servers get none: the
// source reports them unavailable, and the other tools still work.
func (c *Continuation) startCredential(ctx context.Context) context.Context {
	if c.e.credentials == nil || !c.cfg.Forwards() {
		return ctx
	}
	if cred := c.cred.Load(); cred != nil {
		return WithCredential(ctx, cred) // the decision's claim minted it
	}
	cred, err := MintCredential(ctx, c.e.credentials, c.run, c.cfg.IdentityLifetime(), c.e.identitySlide)
	if err != nil {
		c.e.log.Warn("run credential not minted", "run", c.run.ID, "err", err)
		return WithCredential(ctx, nil)
	}
	c.cred.Store(cred)
	return WithCredential(ctx, cred)
}

// endCredential ends the continuation's credential, however the
// continuation ended: its sessions close. Whatever ended it revoked the
// credential in the store already (a pause or settle leaves the run not
// running, a lost lease under another claim), and the next holder mints
// its own; so it costs no statement.
func (c *Continuation) endCredential() {
	if cred := c.cred.Load(); cred != nil {
		cred.end()
	}
}

// slideCredentials slides, in one statement, the credentials of the held
// continuations that are due: the lease keeper calls it on its timer.
func slideCredentials(ctx context.Context, s CredentialStore, held map[int64]*Continuation) error {
	if s == nil {
		return nil
	}
	now := time.Now()
	var due []int64
	for id, c := range held {
		if cred := c.cred.Load(); cred != nil && cred.due(now) {
			due = append(due, id)
		}
	}
	if len(due) == 0 {
		return nil
	}
	return s.SlideRunTokens(ctx, due)
}

// CheckIdentity checks the identity key of an MCP server entry: a
// forwarded credential is Turnstile's to send, so no Authorization header
// may be configured beside it, and it never travels in the clear beyond
// this machine. The error names the server and says what to change.
func (s MCPServer) CheckIdentity() error {
	switch s.Identity {
	case "", IdentityNone:
		return nil
	case IdentityForward:
	default:
		return fmt.Errorf("mcp server %s: identity must be none or forward, not %q", s.Name, s.Identity)
	}
	for name := range s.Headers {
		if strings.EqualFold(name, "Authorization") {
			return fmt.Errorf("mcp server %s: identity: forward sends the run's own Authorization header; remove the configured one", s.Name)
		}
	}
	if scheme, rest, ok := strings.Cut(s.URL, "://"); strings.Contains(scheme, "${") ||
		(ok && strings.Contains(strings.SplitN(rest, "/", 2)[0], "${")) || !ok && strings.Contains(s.URL, "${") {
		// Where ${NAME} makes the scheme or the host, the URL is checked
		// when a run reaches the server, as the environment makes it.
		return nil
	}
	if err := CheckForwardURL(s.URL); err != nil {
		return fmt.Errorf("mcp server %s: %w", s.Name, err)
	}
	return nil
}

// CheckForwardURL refuses a URL a run credential must not be sent to: one
// over plain http to a host that is not this machine's loopback (a host
// from ${NAME} included: it cannot be known to be loopback).
func CheckForwardURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "https" {
		// A URL that does not parse is refused where it is reached.
		return nil
	}
	if u.Scheme == "http" && isLoopback(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("identity: forward needs https for %s: a run's credential is sent over plain http only to a loopback host (localhost, 127.0.0.1, ::1)", u.Redacted())
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckIdentityTTL checks the configuration's identity_ttl; the error
// says what to write instead.
func (c *Configuration) CheckIdentityTTL() error {
	if c.IdentityTTL == "" {
		return nil
	}
	d, err := time.ParseDuration(c.IdentityTTL)
	if err != nil || d < MinIdentityTTL {
		return fmt.Errorf("identity_ttl must be a duration of at least %s (\"2h\", \"90m\"), not %q", MinIdentityTTL, c.IdentityTTL)
	}
	return nil
}
