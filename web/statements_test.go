package web_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/dbtest"
	"github.com/turnstile-dev/turnstile/web"
)

// statementCounter records what a pool sends MySQL, one entry per round
// trip: each query and exec (a multi-statement script is one), each
// BEGIN, COMMIT and ROLLBACK. It records only between start and stop.
type statementCounter struct {
	mu   sync.Mutex
	on   bool
	sent []string
}

func (c *statementCounter) add(what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.on {
		c.sent = append(c.sent, what)
	}
}

func (c *statementCounter) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on, c.sent = true, nil
}

// stop ends the recording and returns what was sent.
func (c *statementCounter) stop() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = false
	return c.sent
}

// db is a fresh migrated database (dbtest) and a pool on it, opened with
// the store's settings (store.Open's), whose statements c counts.
func (c *statementCounter) db(t testing.TB) (*sqlx.DB, string) {
	t.Helper()
	_, dsn := dbtest.New(t)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime, cfg.Loc, cfg.InterpolateParams, cfg.MultiStatements = true, time.UTC, true, true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sqlx.NewDb(sql.OpenDB(countingConnector{Connector: conn, c: c}), "mysql")
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	t.Cleanup(func() { db.Close() })
	return db, dsn
}

type countingConnector struct {
	driver.Connector
	c *statementCounter
}

func (k countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := k.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: k.c}, nil
}

// countingConn passes every call on to the driver's connection, which
// implements each of these interfaces (the store's settings interpolate
// parameters, so queries go out as text, without a prepare).
type countingConn struct {
	driver.Conn
	c *statementCounter
}

func short(query string) string {
	query = strings.Join(strings.Fields(query), " ")
	if len(query) > 90 {
		query = query[:90] + "…"
	}
	return query
}

func (k *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	k.c.add(short(query))
	return k.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (k *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	k.c.add(short(query))
	return k.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (k *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	k.c.add("PREPARE " + short(query))
	return k.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (k *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	k.c.add("BEGIN")
	tx, err := k.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return countingTx{Tx: tx, c: k.c}, nil
}

func (k *countingConn) Ping(ctx context.Context) error { return k.Conn.(driver.Pinger).Ping(ctx) }

func (k *countingConn) ResetSession(ctx context.Context) error {
	return k.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (k *countingConn) IsValid() bool { return k.Conn.(driver.Validator).IsValid() }

func (k *countingConn) CheckNamedValue(v *driver.NamedValue) error {
	return k.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

type countingTx struct {
	driver.Tx
	c *statementCounter
}

func (t countingTx) Commit() error   { t.c.add("COMMIT"); return t.Tx.Commit() }
func (t countingTx) Rollback() error { t.c.add("ROLLBACK"); return t.Tx.Rollback() }

// TestDecisionStatements counts what one edited approval and one answer
// to an input form send MySQL, from the request's session to its
// answer: on the durable path (the decision alone) and in the request
// (the continuation too). Run it with -v to read them. On the durable
// path a decision is five round trips: the session, the user, the run
// read once for the pipeline (which reads the form against its turn),
// the claim, the flash; a form once read the run a second time, only to
// decode the form.
func TestDecisionStatements(t *testing.T) {
	for _, path := range []string{web.PathDurable, web.PathRequest} {
		t.Run(path, func(t *testing.T) {
			counter := &statementCounter{}
			a := newAppWith(t, 0, appEngine{statements: counter}, func(d *web.Deps) { d.DecisionPath = path })
			c := a.signIn(t, "approver")
			count := func(name string, send func() *http.Response) []string {
				t.Helper()
				counter.start()
				res := send()
				sent := counter.stop()
				if res.StatusCode != http.StatusSeeOther {
					t.Fatalf("%s: status %d, want 303", name, res.StatusCode)
				}
				t.Logf("%s, %s path: %d round trips\n\t%s", name, path, len(sent), strings.Join(sent, "\n\t"))
				if path == web.PathDurable && len(sent) > 5 {
					t.Errorf("%s: %d round trips on the durable path, want 5 at most", name, len(sent))
				}
				return sent
			}

			paused, order := a.Waiting(t, "refund")
			count("edited approval", func() *http.Response {
				res, _ := c.post(inboxPath(paused.RunID, "decision"), editForm(paused, order, "1500"))
				return res
			})
			input := a.start(t, "input", "owner", runtime.OriginInteractive)
			count("input form", func() *http.Response {
				res, _ := c.post(inboxPath(input.RunID, "input"), answerForm(input.Digest))
				return res
			})
			if path == web.PathRequest {
				for _, id := range []int64{paused.RunID, input.RunID} {
					if st := a.Run(t, id).Status; st != runtime.StatusCompleted {
						t.Errorf("run %d is %s, want completed", id, st)
					}
				}
			}
		})
	}
}
