package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/metrics"
	"github.com/turnstile-dev/turnstile/runtime/provider/all"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/runtime/seal"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp"
	"github.com/turnstile-dev/turnstile/store"
)

// app is what every command that touches the database shares.
type app struct {
	db *sqlx.DB
	// synced is the pool of the reads that wait for a cluster's commits
	// (store.SyncReads); nil on a single server.
	synced *sqlx.DB
	store  *store.Store
	tools  map[string]runtime.Tool
	engine *runtime.Engine
	mcp    *mcp.Source
	log    *slog.Logger
	// metrics measure what serve and work do; nil for the other commands.
	metrics *metrics.Metrics
	// publicURL is the base of the notifications' links; self are the
	// addresses this process answers on, which no notification may target
	// (see outbox.go).
	publicURL string
	self      []string
	// allowPrivate lets notifications reach private addresses
	// (--webhook-allow-private).
	allowPrivate bool
	getenv       func(string) string
	sealer       runtime.Sealer
}

// stateKeysVar holds the keys that encrypt run state at rest,
// "id:base64key,…", the first of which encrypts (see package seal). It is
// read from the environment only and is no flag, since flags show in ps.
const stateKeysVar = "TURNSTILE_STATE_KEYS"

// stateFormatVar set to 1 seals content as the previous version did, bound
// to no row, so that its processes still read what this one writes during
// a rolling upgrade; unset (or 2) binds every value to its row.
const stateFormatVar = "TURNSTILE_STATE_FORMAT"

// dbFlags are the flags of every command that opens the database, and what
// open reads beside them.
type dbFlags struct {
	dsn   string
	lease time.Duration
	// command names the command, and getenv is its environment: open reads
	// TURNSTILE_STATE_KEYS from it.
	command string
	getenv  func(string) string
	// localDSNs lists the databases to try when no DSN is given (nil: none,
	// as for serve and work), and notice is where open says which it took.
	localDSNs func() []string
	notice    io.Writer
	// publicURL is --public-url; publicDefault stands in for it when it
	// is unset (serve derives it from --addr).
	publicURL, publicDefault string
	// webhookAllowPrivate is --webhook-allow-private.
	webhookAllowPrivate bool
}

func (d *dbFlags) register(fs *flagSet) {
	fs.StringVar(&d.dsn, "dsn", "", "MySQL DSN in go-sql-driver syntax, e.g. root@tcp(127.0.0.1:3306)/turnstile")
	d.command, d.getenv, d.lease = fs.Name(), fs.env.getenv, runtime.DefaultLease
	if d.runsAgents() {
		fs.DurationVar(&d.lease, "lease", runtime.DefaultLease, "how long a claim holds without renewal before another holder may take the run over")
		fs.StringVar(&d.publicURL, "public-url", "", "where people reach this Turnstile, e.g. https://turnstile.example: the base of the decide_url of notifications (default: http:// and --addr)")
		fs.BoolVar(&d.webhookAllowPrivate, "webhook-allow-private", false, "let notifications reach loopback, link-local, private and unspecified addresses and this host's own, refused otherwise (serve --demo turns it on)")
	} else {
		d.localDSNs, d.notice = fs.env.localDSNs, fs.env.stderr
	}
}

// makeRunDSN is the database `make run` uses when 127.0.0.1:3306 answers
// (cmd/devdb -database turnstile).
const makeRunDSN = "root@tcp(127.0.0.1:3306)/turnstile"

// localDSNs are the databases `make run` may have used, in cmd/devdb's
// order after TURNSTILE_DSN: the server on 127.0.0.1:3306, then the
// private one devdb starts under ./var/mysql (when its socket is there).
func localDSNs() []string {
	dsns := []string{makeRunDSN}
	if sock, err := filepath.Abs(filepath.Join("var", "mysql", "sock")); err == nil {
		if st, err := os.Stat(sock); err == nil && st.Mode()&os.ModeSocket != 0 {
			dsns = append(dsns, "root@unix("+sock+")/turnstile")
		}
	}
	return dsns
}

// resolveDSN returns the DSN to open: the one given, else the first of
// localDSNs whose database answers, which it names on d.notice. Without
// either, the error says what to set.
func (d *dbFlags) resolveDSN(ctx context.Context) (string, error) {
	if d.dsn != "" {
		return d.dsn, nil
	}
	const hint = "no database: set --dsn or TURNSTILE_DSN, e.g. TURNSTILE_DSN='" + makeRunDSN + "', the database make run uses"
	if d.localDSNs == nil {
		return "", errors.New(hint + " (make run and make test find or start one)")
	}
	var tried []string
	for _, dsn := range d.localDSNs() {
		err := probe(ctx, dsn)
		if err == nil {
			fmt.Fprintf(d.notice, "turnstile: no --dsn or TURNSTILE_DSN given; using %s, the database make run uses\n", dsn)
			return dsn, nil
		}
		tried = append(tried, fmt.Sprintf("%s: %v", dsn, err))
	}
	return "", fmt.Errorf("%s; tried %s", hint, strings.Join(tried, "; "))
}

// probe reports whether the database of dsn answers, within a few seconds.
func probe(ctx context.Context, dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	cfg.Timeout = 2 * time.Second
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// runsAgents reports whether the command runs agent runs, and so whether
// it says at start how their state is stored.
func (d *dbFlags) runsAgents() bool { return d.command == "serve" || d.command == "work" }

// newLogger returns the JSON logger every command logs through; it redacts
// credentials (see redactAttr) from every record.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l, ReplaceAttr: redactAttr})), nil
}

// sealer returns the keyring of TURNSTILE_STATE_KEYS, or nil (plain JSON)
// when it is unset. A malformed value is an error that never repeats a key.
func (d *dbFlags) sealer(log *slog.Logger) (runtime.Sealer, error) {
	spec := ""
	if d.getenv != nil {
		spec = d.getenv(stateKeysVar)
	}
	if strings.TrimSpace(spec) == "" {
		if d.runsAgents() {
			log.Warn("state is stored unencrypted",
				"hint", "set "+stateKeysVar+"=id:base64key (16, 24 or 32 bytes) to encrypt suspended runs and transcripts with AES-GCM")
		}
		return nil, nil
	}
	k, err := seal.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", stateKeysVar, err)
	}
	switch f := strings.TrimSpace(d.getenv(stateFormatVar)); f {
	case "", "2":
	case "1":
		k.SealUnbound()
		if d.runsAgents() {
			log.Warn("content is sealed as the previous version sealed it, bound to no row, for its processes to read",
				"hint", "once every process runs this version, unset "+stateFormatVar+", restart them, and run turnstile state reseal")
		}
	default:
		return nil, fmt.Errorf("%s must be 1 (the previous version's format, for a rolling upgrade) or 2 (the default), not %q", stateFormatVar, f)
	}
	if d.runsAgents() {
		log.Info("state is encrypted at rest", "sealing_key_id", k.SealingKey(), "key_ids", k.Keys())
		// Content an older version sealed opens bound to no row: say so
		// once, with what to run.
		k.LogUnbound(log)
	}
	return k, nil
}

// openLogged is open with the JSON logger at a level, for the commands that
// need the logger for nothing else.
func openLogged(ctx context.Context, d dbFlags, e env, level string) (*app, error) {
	log, err := newLogger(e.stderr, level)
	if err != nil {
		return nil, err
	}
	return open(ctx, d, log)
}

// open connects, migrates, and wires the engine.
func open(ctx context.Context, d dbFlags, log *slog.Logger) (*app, error) {
	// The driver's own complaints (a dropped idle connection) go through
	// the JSON log too.
	mysql.SetLogger(mysqlLogger{log})
	dsn, err := d.resolveDSN(ctx)
	if err != nil {
		return nil, err
	}
	sealer, err := d.sealer(log)
	if err != nil {
		return nil, err
	}
	db, err := store.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	if err := store.Migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	st := store.New(db)
	synced, err := st.SyncReads(ctx, dsn)
	if err != nil {
		db.Close()
		return nil, err
	}
	if synced != nil {
		log.Info("the database is a Galera cluster node: the reads that must see every commit of the cluster wait for it (wsrep_sync_wait)")
	}
	a := &app{db: db, synced: synced, store: st, tools: builtin.Registry(builtin.Tools(st)...), log: log}
	a.publicURL, a.getenv, a.sealer, a.allowPrivate = d.publicURLOrDefault(), d.getenv, sealer, d.webhookAllowPrivate
	opts := runtime.Options{Store: st, Tools: a.tools, Providers: all.Factory,
		Validator: schema.New(), Sealer: sealer, Lease: d.lease, Logger: log, PublicURL: a.publicURL,
		Credentials: st}
	if d.runsAgents() {
		a.metrics = metrics.New(log)
		if err := errors.Join(a.metrics.WatchBacklog(st), a.metrics.WatchDB(db.DB), a.metrics.WatchOutbox(st)); err != nil {
			a.closeDB()
			return nil, fmt.Errorf("metrics: %w", err)
		}
		opts.Metrics = a.metrics
	}
	if d.runsAgents() && d.webhookAllowPrivate {
		log.Info("notifications may reach private addresses and this host (--webhook-allow-private)")
	}
	a.mcp = mcp.NewSource(mcp.Options{Getenv: d.getenv, Logger: log})
	opts.Source = a.mcp
	a.engine = runtime.New(opts)
	if a.metrics != nil {
		if err := a.metrics.WatchFeed(a.engine); err != nil {
			a.closeDB()
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	warnPublicURL(ctx, a, d)
	return a, nil
}

func (a *app) knownTool(name string) bool {
	_, ok := a.tools[name]
	return ok
}

// close ends the MCP sessions, then the database pools.
func (a *app) close() {
	a.mcp.Close()
	a.closeDB()
}

func (a *app) closeDB() {
	a.db.Close()
	if a.synced != nil {
		a.synced.Close()
	}
}

// mysqlLogger sends the MySQL driver's log lines to slog.
type mysqlLogger struct{ log *slog.Logger }

func (l mysqlLogger) Print(v ...any) { l.log.Warn("mysql driver", "msg_text", fmt.Sprint(v...)) }
