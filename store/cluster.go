package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
)

// What the store does on a multi-primary Galera cluster. A
// node commits what it certified and applies the other nodes' commits a
// moment later, so a plain read can miss a commit made elsewhere. Claims
// and steps need nothing more: their guarded writes conflict at
// certification, which the losing node reports as a deadlock (see
// isContention). The reads that must not miss one get a pool of their own.

// syncedPoolSize bounds the pool of the reads that wait for the cluster:
// a lost claim's classification, the event streams' reads, a bearer
// token's second look, and the web sessions (see cmd/turnstile).
const syncedPoolSize = 32

// SyncReads makes the reads that must see every commit of the cluster —
// the one that classifies a lost claim (RunSynced), the event streams'
// (Events, LastSeq, FollowedEvents), a bearer token's second look
// (Authenticate), and whatever the caller reads through the pool it
// returns (serve's web sessions) — wait, each, until this node
// has applied every commit the cluster made before it (wsrep_sync_wait=1,
// set on a pool of their own). On a single server it does nothing and
// returns nil: every read there sees every commit. Otherwise it returns
// that pool, for the caller to close after the store's.
func (s *Store) SyncReads(ctx context.Context, dsn string) (*sqlx.DB, error) {
	var name, value string
	// SHOW VARIABLES, not @@wsrep_on: MySQL has no such variable, and
	// answers no row here instead of an error.
	err := s.db.QueryRowContext(ctx, "SHOW VARIABLES LIKE 'wsrep_on'").Scan(&name, &value)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && value != "ON") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: is this a cluster node: %w", err)
	}
	db, err := open(ctx, dsn, map[string]string{"wsrep_sync_wait": "1"}, syncedPoolSize)
	if err != nil {
		return nil, err
	}
	s.synced = db
	return db, nil
}

// reads is the pool of the reads that must see every commit.
func (s *Store) reads() *sqlx.DB {
	if s.synced != nil {
		return s.synced
	}
	return s.db
}

// RunSynced is Run as the whole cluster has it, for classifying a lost
// claim: a claim can lose to a winner on another node whose commit this
// node has not applied yet.
func (s *Store) RunSynced(ctx context.Context, id int64) (*runtime.Run, error) {
	return s.run(ctx, s.reads(), id)
}

// NotReady reports an error of a cluster node that is not part of the
// cluster's primary component (MySQL error 1047): it takes no reads or
// writes until it rejoins, and the same request to another node, or to
// this one a moment later, goes through.
func NotReady(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1047
}
