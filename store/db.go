// Package store keeps Turnstile's state in MySQL (or MariaDB) through sqlx:
// every query, the atomic claim, leases and the migrations runner. Each
// method's SQL sits next to it.
package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"

	"github.com/turnstile-dev/turnstile/migrations"
	"github.com/turnstile-dev/turnstile/runtime"
)

// Store is the MySQL implementation of the engine's store and of what the
// web layer reads.
type Store struct {
	db      *sqlx.DB
	synced  *sqlx.DB // see SyncReads; nil on a single server
	configs configCache
	claims  groupCommit[runtime.Claim]
	votes   groupCommit[runtime.Ballot]
}

// New wraps an open database.
func New(db *sqlx.DB) *Store { return &Store{db: db} }

// DB returns the underlying pool, for the few callers (tests, readiness)
// that need it.
func (s *Store) DB() *sqlx.DB { return s.db }

// Open connects to the DSN (go-sql-driver syntax) with the settings the
// store relies on: times parsed as UTC, parameters interpolated on the
// client (one round trip per statement instead of three), and a database
// session in UTC so DATETIME(6) values compare with Go's clock.
func Open(ctx context.Context, dsn string) (*sqlx.DB, error) {
	return open(ctx, dsn, nil, 64)
}

// open is Open with session variables of its own (sent by the driver as
// SET statements on every new connection) and a pool of size connections.
func open(ctx context.Context, dsn string, session map[string]string, size int) (*sqlx.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: parse dsn: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	// A step's commit is one multi-statement script (see Commit). No query
	// is ever built from input: every value is a parameter.
	cfg.MultiStatements = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	for k, v := range session {
		cfg.Params[k] = v
	}
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("store: open: %w", err)
	}
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	db.SetConnMaxLifetime(time.Hour)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: connect to %s: %w", cfg.Addr, err)
	}
	return db, nil
}

func migrator(db *sqlx.DB) (*goose.Provider, error) {
	p, err := goose.NewProvider(goose.DialectMySQL, db.DB, migrations.FS)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return p, nil
}

// Migrate applies every pending migration.
func Migrate(ctx context.Context, db *sqlx.DB) error {
	p, err := migrator(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	return nil
}

// Ready reports whether the database answers and every migration is applied.
func (s *Store) Ready(ctx context.Context) error {
	p, err := migrator(s.db)
	if err != nil {
		return err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("store: ready: %w", err)
	}
	if pending {
		return errors.New("store: ready: migrations pending")
	}
	return nil
}

// notFound turns sql.ErrNoRows into runtime.ErrNotFound, wrapped with the operation.
func notFound(op string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("store: %s: %w", op, runtime.ErrNotFound)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

// isDuplicate reports a unique-key clash (MySQL error 1062).
func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// isNullRefused reports a NULL refused by a NOT NULL column (MySQL error
// 1048): how a single-row INSERT whose guard said no fails on purpose.
func isNullRefused(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1048
}

// isContention reports a transaction that lost to another on a lock: a
// deadlock (1213; also how Galera reports a lost certification race) or a
// lock wait timeout (1205). Nothing of it was kept; it may be tried again.
func isContention(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// execContended runs one statement on its own (autocommitted), again (up
// to contendedTries in all) while it loses a lock race to a transaction
// that locks the same rows in another order, such as a user's deletion
// locking their runs: each lost attempt was rolled back whole, and its
// guard decides afresh.
func execContended(ctx context.Context, db sqlx.ExecerContext, q string, args ...any) (sql.Result, error) {
	res, err := db.ExecContext(ctx, q, args...)
	for try := 1; isContention(err) && try < contendedTries; try++ {
		res, err = db.ExecContext(ctx, q, args...)
	}
	return res, err
}

// oneRow turns an UPDATE's result into nil when it changed exactly one row
// and into lost when it changed none: the guard said no.
func oneRow(res interface{ RowsAffected() (int64, error) }, err error, lost error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return lost
	}
	return nil
}

// nullJSON is a JSON column's value: NULL for none. Run content goes to
// MySQL as bytes, never as text: sealed content is binary, and the
// driver's interpolation marks bytes as such.
func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return []byte(raw)
}
