package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store"
)

// app is what every command that touches the database shares.
type app struct {
	db     *sqlx.DB
	store  *store.Store
	tools  map[string]runtime.Tool
	engine *runtime.Engine
	log    *slog.Logger
}

// dbFlags are the flags of every command that opens the database.
type dbFlags struct {
	dsn   string
	lease time.Duration
}

func (d *dbFlags) register(fs *flagSet) {
	fs.StringVar(&d.dsn, "dsn", "", "MySQL DSN in go-sql-driver syntax, e.g. root@tcp(127.0.0.1:3306)/turnstile")
	fs.DurationVar(&d.lease, "lease", runtime.DefaultLease, "how long a claim holds without renewal before another holder may take the run over")
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// open connects, migrates, and wires the engine.
func open(ctx context.Context, d dbFlags, log *slog.Logger) (*app, error) {
	if d.dsn == "" {
		return nil, errors.New("no database: set --dsn or TURNSTILE_DSN (make run and make test find or start one)")
	}
	db, err := store.Open(ctx, d.dsn)
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	st := store.New(db)
	tools := builtin.Registry(builtin.Tools(st)...)
	eng := runtime.New(runtime.Options{Store: st, Tools: tools, Providers: scripted.Factory,
		Validator: schema.New(), Lease: d.lease, Logger: log})
	return &app{db: db, store: st, tools: tools, engine: eng, log: log}, nil
}

func (a *app) knownTool(name string) bool {
	_, ok := a.tools[name]
	return ok
}

func (a *app) close() { a.db.Close() }
