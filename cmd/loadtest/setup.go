package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alexedwards/scs/mysqlstore"
	"github.com/alexedwards/scs/v2"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/runtime/provider/all"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/runtime/seal"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store"
)

// waitingRun is a run that waits for approval of a known turn.
type waitingRun struct {
	id     int64
	digest string
}

// preparer makes the waiting runs a phase decides.
type preparer interface {
	waitingRuns(ctx context.Context, configuration string, n int) ([]waitingRun, error)
}

// inboxSession is a signed-in session of the load user, as the inbox's
// forms need it: its cookie and its CSRF token.
type inboxSession struct {
	cookie, csrf string
}

// The server's session cookie and keys (cmd/turnstile, web/auth.go).
const (
	sessionCookie   = "turnstile_session"
	sessionUserKey  = "user_id"
	sessionCSRFKey  = "csrf"
	sessionLifetime = 12 * time.Hour
)

// database is the server's database, opened by this command to prepare
// its data in bulk: it starts runs through the same engine and store the
// server runs on, as "turnstile serve" would, without any HTTP.
type database struct {
	store       *store.Store
	engine      *runtime.Engine
	owner       runtime.Actor
	tokenID     int64 // the token this command created, revoked at the end
	concurrency int
	sessions    *scs.SessionManager
	signedIn    []string // tokens of the sessions this command made, deleted at the end
}

// loadScopes are what the command's token may do.
var loadScopes = []string{runtime.ScopeRunStart, runtime.ScopeRunRead, runtime.ScopeRunDecide}

// openDatabase connects to the server's database, which must be migrated,
// makes sure the load user and configurations exist, and creates a token
// unless one was given. TURNSTILE_STATE_KEYS must match the server's, or
// it could not read the runs this command suspends.
func openDatabase(ctx context.Context, o *options, getenv func(string) string) (*database, string, error) {
	sealer, err := sealerFrom(getenv("TURNSTILE_STATE_KEYS"))
	if err != nil {
		return nil, "", err
	}
	db, err := store.Open(ctx, o.dsn)
	if err != nil {
		return nil, "", err
	}
	// MySQL's connections are shared with the server under test (151 by
	// default): take no more than the setup needs, and give them back
	// between setups (see release).
	db.SetMaxOpenConns(o.setupConcurrency)
	db.SetMaxIdleConns(o.setupConcurrency)
	st := store.New(db)
	fail := func(err error) (*database, string, error) {
		db.Close()
		return nil, "", err
	}
	if err := st.Ready(ctx); err != nil {
		return fail(fmt.Errorf("the database is not ready; start turnstile serve on it first, which migrates it: %w", err))
	}
	tools := builtin.Registry(builtin.Tools(st)...)
	eng := runtime.New(runtime.Options{Store: st, Tools: tools, Providers: all.Factory, Validator: schema.New(),
		Sealer: sealer, Logger: slog.New(slog.DiscardHandler)})
	known := func(name string) bool { _, ok := tools[name]; return ok }
	for _, which := range configNames {
		id, text := o.configYAML(which)
		cfg, err := configfile.Parse(id+".yaml", []byte(text), known)
		if err != nil {
			return fail(err)
		}
		if err := st.SaveConfiguration(ctx, cfg); err != nil {
			return fail(err)
		}
	}
	u, err := st.UserByName(ctx, o.user)
	if errors.Is(err, runtime.ErrNotFound) {
		// No password: nobody signs in as the load user.
		u = &runtime.User{Name: o.user, Role: runtime.RoleUser, Grants: []string{runtime.GrantApprove}}
		err = st.CreateUser(ctx, u)
	}
	if err != nil {
		return fail(err)
	}
	d := &database{store: st, engine: eng, owner: u.Actor(), concurrency: o.setupConcurrency, sessions: scs.New()}
	// The server's own session store, without its cleanup goroutine: the
	// server runs one.
	d.sessions.Store = mysqlstore.NewWithCleanupInterval(db.DB, 0)
	d.sessions.Lifetime = sessionLifetime
	token := o.token
	if token == "" {
		plain, t, err := st.CreateToken(ctx, u.ID, loadScopes, 24*time.Hour)
		if err != nil {
			return fail(err)
		}
		token, d.tokenID = plain, t.ID
	}
	return d, token, nil
}

func sealerFrom(spec string) (runtime.Sealer, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	k, err := seal.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("TURNSTILE_STATE_KEYS: %w", err)
	}
	return k, nil
}

// close revokes the token the command created, signs its sessions out
// and closes the pool.
func (d *database) close(ctx context.Context) error {
	ctx = context.WithoutCancel(ctx)
	var err error
	if d.tokenID != 0 {
		err = d.store.RevokeToken(ctx, d.tokenID)
	}
	if e := parallel(ctx, len(d.signedIn), d.concurrency, func(ctx context.Context, i int) error {
		return d.sessions.Store.Delete(d.signedIn[i])
	}); e != nil && err == nil {
		err = fmt.Errorf("sign the load sessions out: %w", e)
	}
	d.store.DB().Close()
	return err
}

// inboxSessions signs the load user in n times, as n people would be,
// through the server's own session store: no password is checked or
// needed.
func (d *database) inboxSessions(ctx context.Context, n int) ([]inboxSession, error) {
	out := make([]inboxSession, n)
	tokens := make([]string, n)
	err := parallel(ctx, n, d.concurrency, func(ctx context.Context, i int) error {
		sctx, err := d.sessions.Load(ctx, "")
		if err != nil {
			return err
		}
		csrf := make([]byte, 32)
		rand.Read(csrf)
		out[i].csrf = base64.RawURLEncoding.EncodeToString(csrf)
		d.sessions.Put(sctx, sessionUserKey, d.owner.ID)
		d.sessions.Put(sctx, sessionCSRFKey, out[i].csrf)
		if out[i].cookie, _, err = d.sessions.Commit(sctx); err != nil {
			return fmt.Errorf("sign the load user in: %w", err)
		}
		tokens[i] = out[i].cookie
		return nil
	})
	for _, t := range tokens {
		if t != "" {
			d.signedIn = append(d.signedIn, t)
		}
	}
	d.release()
	return out, err
}

// waitingRuns starts n runs of a load configuration through the engine,
// each up to its pause.
func (d *database) waitingRuns(ctx context.Context, configuration string, n int) ([]waitingRun, error) {
	runs := make([]waitingRun, n)
	err := parallel(ctx, n, d.concurrency, func(ctx context.Context, i int) error {
		c, err := d.engine.Start(ctx, runtime.StartRequest{Configuration: configuration,
			Prompt: fmt.Sprintf("load test run %d", i+1), Owner: d.owner})
		if err != nil {
			return fmt.Errorf("start a run of %s: %w", configuration, err)
		}
		out := c.Run(ctx, nil)
		if out.Err != nil {
			return fmt.Errorf("run %d: %w", out.RunID, out.Err)
		}
		if out.Status != runtime.StatusWaitingForApproval {
			return fmt.Errorf("run %d of %s is %s, not waiting for approval", out.RunID, configuration, out.Status)
		}
		runs[i] = waitingRun{id: out.RunID, digest: out.Digest}
		return nil
	})
	d.release()
	return runs, err
}

// release closes the pool's idle connections, which would otherwise count
// against MySQL's max_connections while the server is measured.
func (d *database) release() {
	d.store.DB().SetMaxIdleConns(0)
	d.store.DB().SetMaxIdleConns(d.concurrency)
}

// durableDecisions counts the runs whose decision the database holds as
// taken on the durable path.
func (d *database) durableDecisions(ctx context.Context, runs []waitingRun) (int, error) {
	var n atomic.Int64
	err := parallel(ctx, len(runs), d.concurrency, func(ctx context.Context, i int) error {
		rec, err := d.store.Decision(ctx, runs[i].id, runs[i].digest)
		if errors.Is(err, runtime.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if rec.Path == runtime.PathDurable {
			n.Add(1)
		}
		return nil
	})
	d.release()
	return int(n.Load()), err
}

// apiPreparer starts the waiting runs through POST /api/runs, for a
// server whose database this command may not open.
type apiPreparer struct {
	c           *client
	concurrency int
}

func (a apiPreparer) waitingRuns(ctx context.Context, configuration string, n int) ([]waitingRun, error) {
	runs := make([]waitingRun, n)
	err := parallel(ctx, n, a.concurrency, func(ctx context.Context, i int) error {
		r, err := a.c.startRun(ctx, configuration, fmt.Sprintf("load test run %d", i+1))
		runs[i] = r
		return err
	})
	return runs, err
}

// parallel calls fn for 0…n-1 from at most k goroutines and returns the
// first error, after which it starts no more calls.
func parallel(ctx context.Context, n, k int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, k) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// progress prints a line to w every interval until stop is called.
func progress(w io.Writer, every time.Duration, line func() string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintln(w, line())
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
