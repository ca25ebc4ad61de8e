// Package testrig is the engine on a real MySQL as tests set it up: a
// database of its own (store/dbtest), the store, the built-in tools, an
// engine with the scripted provider, configurations, users by role and demo
// orders; helpers that start, decide and inspect runs; a snapshot of what a
// refused request must leave as it was; and one reader of NDJSON streams.
//
// Only tests import it: what it does on failure is fail the test.
package testrig

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// World is one test's database with everything an engine needs in it, and
// an engine on it.
type World struct {
	DB     *sqlx.DB
	DSN    string
	Store  *store.Store
	Tools  map[string]runtime.Tool
	Engine *runtime.Engine
	// Users by name: owner (owns the runs a test starts), approver (the
	// approve grant), other (no grant, owns nothing), admin, and those
	// added with User. Each has the PasswordHash option's hash.
	Users map[string]*runtime.User

	engine runtime.Options
	order  builtin.Order
	prompt string
	orders int
}

// Option changes how New sets a world up.
type Option func(*settings)

type settings struct {
	db      *sqlx.DB
	dsn     string
	tools   []runtime.Tool
	configs []string
	users   []runtime.User
	hash    string
	engine  runtime.Options
	order   builtin.Order
	prompt  string
}

// OnDB sets the world up on a migrated database the test already has
// (a private server's, say) instead of a fresh one of its own.
func OnDB(db *sqlx.DB, dsn string) Option {
	return func(s *settings) { s.db, s.dsn = db, dsn }
}

// Tools adds tools beside the built-in ones.
func Tools(extra ...runtime.Tool) Option {
	return func(s *settings) { s.tools = append(s.tools, extra...) }
}

// Configs are configurations, in YAML, to parse and save.
func Configs(yamls ...string) Option {
	return func(s *settings) { s.configs = append(s.configs, yamls...) }
}

// User adds a user beside the default four.
func User(name string, role runtime.Role, grants ...string) Option {
	return func(s *settings) { s.users = append(s.users, runtime.User{Name: name, Role: role, Grants: grants}) }
}

// PasswordHash is the password hash of every user (none when not given):
// the caller hashes, so that this package needs nothing of web.
func PasswordHash(hash string) Option {
	return func(s *settings) { s.hash = hash }
}

// Engine sets the engine's options: Lease, Sealer, Source, Metrics, Logger,
// Providers (the scripted provider's when nil). Store, Tools and
// Validator are always the world's.
func Engine(o runtime.Options) Option {
	return func(s *settings) { s.engine = o }
}

// Orders is the template of the demo orders Order creates: each is o with
// a number of its own after o.ID. The default is T-, "Test", 5000 EUR.
func Orders(o builtin.Order) Option {
	return func(s *settings) { s.order = o }
}

// Prompt is the prompt of the runs Start starts (default "Please refund
// %s"): a format whose %s is a fresh order's id; a prompt without %s names
// no order, and none is made.
func Prompt(format string) Option {
	return func(s *settings) { s.prompt = format }
}

// New sets a world up; anything that fails fails the test.
func New(t testing.TB, opts ...Option) *World {
	t.Helper()
	s := settings{
		order:  builtin.Order{ID: "T-", Customer: "Test", AmountCents: 5000, Currency: "EUR"},
		prompt: "Please refund %s",
	}
	for _, o := range opts {
		o(&s)
	}
	if s.db == nil {
		s.db, s.dsn = dbtest.New(t)
	}
	st := store.New(s.db)
	w := &World{DB: s.db, DSN: s.dsn, Store: st, Tools: builtin.Registry(append(builtin.Tools(st), s.tools...)...),
		Users: map[string]*runtime.User{}, engine: s.engine, order: s.order, prompt: s.prompt}
	w.Engine = w.NewEngine(s.engine)
	w.Configure(t, s.configs...)
	users := append([]runtime.User{
		{Name: "owner", Role: runtime.RoleUser},
		{Name: "approver", Role: runtime.RoleUser, Grants: []string{runtime.GrantApprove}},
		{Name: "other", Role: runtime.RoleUser},
		{Name: "admin", Role: runtime.RoleAdmin},
	}, s.users...)
	for _, u := range users {
		u.PasswordHash = s.hash
		if err := st.CreateUser(context.Background(), &u); err != nil {
			t.Fatalf("testrig: user %s: %v", u.Name, err)
		}
		w.Users[u.Name] = &u
	}
	return w
}

// NewEngine returns another engine on the world's store and tools, with
// the scripted provider (unless o names its providers) and the schema
// validator: another process. The rest of its options are o's.
func (w *World) NewEngine(o runtime.Options) *runtime.Engine {
	if o.Providers == nil {
		o.Providers = scripted.Factory
	}
	o.Store, o.Tools, o.Validator = w.Store, w.Tools, schema.New()
	if o.Credentials == nil {
		o.Credentials = w.Store
	}
	return runtime.New(o)
}

// Configure parses and saves configurations, failing the test on the
// first that does not parse or save.
func (w *World) Configure(t testing.TB, yamls ...string) {
	t.Helper()
	for i, y := range yamls {
		cfg, err := configfile.Parse(fmt.Sprintf("test-%d.yaml", i), []byte(y), func(n string) bool { _, ok := w.Tools[n]; return ok })
		if err != nil {
			t.Fatalf("testrig: configuration %d: %v\n%s", i, err, y)
		}
		if err := w.Store.SaveConfiguration(context.Background(), cfg); err != nil {
			t.Fatalf("testrig: save configuration %s: %v", cfg.Identifier, err)
		}
	}
}

// Actor is the named user as the engine sees them; it panics for a name
// the world has no user of, which is a mistake in the test.
func (w *World) Actor(name string) runtime.Actor {
	u, ok := w.Users[name]
	if !ok {
		panic("testrig: no user " + name)
	}
	return u.Actor()
}

// Order creates a fresh demo order and returns its id. Ids count from
// 1001, so that no id of a test's first 8999 is a prefix of another.
func (w *World) Order(t testing.TB) string {
	t.Helper()
	w.orders++
	o := w.order
	o.ID = fmt.Sprintf("%s%d", w.order.ID, 1000+w.orders)
	if err := w.Store.CreateDemoOrder(context.Background(), o); err != nil {
		t.Fatalf("testrig: order %s: %v", o.ID, err)
	}
	return o.ID
}

// promptFor returns a prompt of the format and the order it names, made
// fresh, or "" when it names none.
func (w *World) promptFor(t testing.TB, format string) (prompt, order string) {
	t.Helper()
	if format == "" {
		format = w.prompt
	}
	if !strings.Contains(format, "%s") {
		return format, ""
	}
	order = w.Order(t)
	return fmt.Sprintf(format, order), order
}
