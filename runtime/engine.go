package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultLease is how long a claim holds without a renewal before a worker
// may take the run over.
const DefaultLease = 30 * time.Second

// maxPromptBytes bounds a run's prompt.
const maxPromptBytes = 64 << 10

// Engine runs agent runs and carries out people's decisions about them.
// It is safe for concurrent use.
type Engine struct {
	store     Store
	tools     map[string]Tool
	source    ToolSource
	providers ProviderFactory
	validator Validator
	sealer    Sealer
	lease     time.Duration
	log       *slog.Logger
	metrics   Metrics
	leases    *leaseKeeper
	// credentials keeps the run credentials of forwarding MCP servers.
	credentials   CredentialStore
	identitySlide time.Duration
	feed          *feed
	changes       *changeFeed
	// publicURL is the base of the links notifications carry.
	publicURL string

	draining  chan struct{}
	drainOnce sync.Once
}

// Options are an Engine's dependencies; Store, Tools, Providers and
// Validator are required.
type Options struct {
	Store Store
	Tools map[string]Tool
	// Source brings a configuration's further tools (MCP); optional.
	Source    ToolSource
	Providers ProviderFactory
	Validator Validator
	// Credentials mints the run credentials that MCP servers with
	// identity: forward are sent; without it they get none and are
	// unavailable.
	Credentials CredentialStore
	// IdentitySlide is how often a held run's credential slides;
	// max(60s, identity_ttl/2) when zero. Tests shorten it.
	IdentitySlide time.Duration
	// Sealer protects run content at rest; Plain when nil.
	Sealer Sealer
	// Lease is the claim's lease; DefaultLease when zero.
	Lease  time.Duration
	Logger *slog.Logger
	// Metrics is told what the engine does; nothing is measured when nil.
	Metrics Metrics
	// PublicURL is where people reach this Turnstile, the base of the
	// decide_url and run_url of notifications (no trailing slash needed).
	PublicURL string
}

// New returns an engine.
func New(o Options) *Engine {
	e := &Engine{store: o.Store, tools: o.Tools, source: o.Source, providers: o.Providers, validator: o.Validator,
		sealer: o.Sealer, lease: o.Lease, log: o.Logger, metrics: o.Metrics, draining: make(chan struct{}),
		publicURL: strings.TrimRight(o.PublicURL, "/"), credentials: o.Credentials, identitySlide: o.IdentitySlide}
	if e.sealer == nil {
		e.sealer = Plain{}
	}
	if e.lease <= 0 {
		e.lease = DefaultLease
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.metrics == nil {
		e.metrics = noMetrics{}
	}
	e.leases = &leaseKeeper{store: e.store, lease: e.lease, log: e.log, credentials: e.credentials}
	e.feed = newFeed(e)
	e.changes = newChangeFeed(e)
	return e
}

// Tool returns a registered tool.
func (e *Engine) Tool(name string) (Tool, bool) {
	t, ok := e.tools[name]
	return t, ok
}

// holderID names one claim: a continuation's lease belongs to it alone, so
// two continuations in one process can never take each other's steps.
func holderID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return fmt.Sprintf("p%d-%s", os.Getpid(), hex.EncodeToString(b))
}

// StartRequest starts a run.
type StartRequest struct {
	Configuration string // identifier
	Prompt        string
	Owner         Actor
	Origin        Origin
}

// Start creates a run held by the caller and returns its continuation,
// which runs it until it pauses or settles. Refusals: not_found for an
// unknown configuration, inactive_configuration, invalid_request.
func (e *Engine) Start(ctx context.Context, req StartRequest) (*Continuation, error) {
	run, cfg, state, content, err := e.newRun(ctx, req)
	if err != nil {
		return nil, err
	}
	run.Status, run.ClaimedBy = StatusRunning, holderID()
	mint := e.credentialMint(run, cfg)
	if mint != nil {
		sealed := content
		content = func(id int64) (NewRunContent, error) {
			c, err := sealed(id)
			c.Credential = mint
			return c, err
		}
	}
	if err := e.store.CreateRun(ctx, run, e.lease, content); err != nil {
		return nil, err
	}
	c := e.continuation(run, cfg, state, nil)
	c.stored = len(state.Messages)
	c.minted(mint)
	return c, nil
}

// Enqueue creates a queued run that a worker starts, and returns its id.
func (e *Engine) Enqueue(ctx context.Context, req StartRequest) (int64, error) {
	run, _, _, content, err := e.newRun(ctx, req)
	if err != nil {
		return 0, err
	}
	run.Status = StatusQueued
	if err := e.store.CreateRun(ctx, run, 0, content); err != nil {
		return 0, err
	}
	return run.ID, nil
}

// newRun checks a start request and returns the run's row, its first
// state, and what seals its content once the store has given it its id
// (see Store.CreateRun).
func (e *Engine) newRun(ctx context.Context, req StartRequest) (*Run, *Configuration, State, func(int64) (NewRunContent, error), error) {
	prompt, err := checkPrompt(req.Prompt, "prompt")
	if err != nil {
		return nil, nil, State{}, nil, err
	}
	switch {
	case !utf8.ValidString(req.Configuration):
		return nil, nil, State{}, nil, refuse(CodeNotFound, "no configuration %q", req.Configuration)
	}
	origin := req.Origin
	if origin == "" {
		origin = OriginInteractive
	}
	if origin != OriginInteractive && origin != OriginProcess {
		return nil, nil, State{}, nil, refuse(CodeInvalidRequest, "origin must be interactive or process")
	}
	cfg, err := e.store.ConfigurationByIdentifier(ctx, req.Configuration)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, State{}, nil, refuse(CodeNotFound, "no configuration %q", req.Configuration)
	}
	if err != nil {
		return nil, nil, State{}, nil, err
	}
	if !cfg.Active {
		return nil, nil, State{}, nil, refuse(CodeInactiveConfiguration, "configuration %q is not active", cfg.Identifier)
	}
	for _, name := range cfg.Tools {
		if _, ok := e.tools[name]; !ok {
			return nil, nil, State{}, nil, refuse(CodeInvalidRequest, "configuration %q names tool %q, which this server does not have", cfg.Identifier, name)
		}
	}
	var state State
	if cfg.SystemPrompt != "" {
		state.Messages = append(state.Messages, Message{Role: "system", Content: cfg.SystemPrompt})
	}
	state.Messages = append(state.Messages, Message{Role: "user", Content: prompt})
	run := &Run{ConfigurationID: cfg.ID, OwnerID: req.Owner.ID, Origin: origin}
	started := TurnStartedPayload{Turn: 1, Content: Content{Value: prompt}, By: req.Owner.Name}
	return run, cfg, state, e.newRunContent(prompt, state, filter(cfg.PrivacyLevel, started)), nil
}

// checkPrompt is what a person's message (a run's prompt, a follow-up)
// must be, trimmed: some text, valid UTF-8, at most maxPromptBytes.
func checkPrompt(s, what string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "", refuse(CodeInvalidRequest, "the %s is empty", what)
	case len(s) > maxPromptBytes:
		return "", refuse(CodeInvalidRequest, "the %s is longer than %d bytes", what, maxPromptBytes)
	case !utf8.ValidString(s):
		return "", refuse(CodeInvalidRequest, "the %s is not valid text (UTF-8)", what)
	}
	return s, nil
}

// newRunContent seals what a new run stores, given the id the store gave
// it: sealed content is bound to its run, whose id the INSERT makes.
func (e *Engine) newRunContent(prompt string, state State, started json.RawMessage) func(id int64) (NewRunContent, error) {
	return func(id int64) (NewRunContent, error) {
		blob, err := e.encodeState(id, state)
		if err != nil {
			return NewRunContent{}, err
		}
		msgs, err := e.encodeMessages(id, 0, state.Messages)
		if err != nil {
			return NewRunContent{}, err
		}
		sealed, err := e.sealText(prompt, RunPlace("prompt", id))
		if err != nil {
			return NewRunContent{}, err
		}
		title, err := e.sealText(CutTitle(prompt), RunPlace("title", id))
		if err != nil {
			return NewRunContent{}, err
		}
		if started, err = e.sealJSON(started, EventPlace(id, 1)); err != nil {
			return NewRunContent{}, err
		}
		return NewRunContent{State: blob, Prompt: sealed, Title: title, Messages: msgs, Started: started}, nil
	}
}
