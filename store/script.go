package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// script is a multi-statement script being built: the statements, their
// arguments in order, and how many statements there are so far. It goes to
// MySQL as one packet, so a transaction of many statements costs one round
// trip; each statement that a caller reads back is named by the handle
// add returns, never by counting.
type script struct {
	q    strings.Builder
	args []any
	n    int
}

// stmt names one statement of a script, to read its result by.
type stmt int

// add appends one statement and its arguments and returns its handle.
func (sc *script) add(query string, args ...any) stmt {
	if sc.n > 0 {
		sc.q.WriteString(";\n")
	}
	sc.q.WriteString(query)
	sc.args = append(sc.args, args...)
	sc.n++
	return stmt(sc.n - 1)
}

// guardedRows appends one INSERT of rows, each row a SELECT that yields it
// only while guard holds; no rows, no statement. Nobody reads its count
// back, so it returns no handle.
func (sc *script) guardedRows(insert, guard string, rows [][]any) {
	if len(rows) == 0 {
		return
	}
	var q strings.Builder
	q.WriteString(insert)
	var args []any
	for i, row := range rows {
		if i > 0 {
			q.WriteString(" UNION ALL")
		}
		q.WriteString(" SELECT " + strings.Repeat("?, ", len(row)-1) + "? FROM DUAL WHERE " + guard)
		args = append(args, row...)
	}
	sc.add(q.String(), args...)
}

// scriptResult is what each statement of a script that ran did.
type scriptResult struct {
	rows, ids []int64
}

// affected is the ROW_COUNT() of the statement st: the rows it changed.
func (r scriptResult) affected(st stmt) int64 { return r.rows[st] }

// insertID is the LAST_INSERT_ID() that the statement st reported.
func (r scriptResult) insertID(st stmt) int64 { return r.ids[st] }

// run sends the script on one connection, as one packet, and returns the
// per-statement results. A script that fails part-way may leave its
// transaction open: it is rolled back before the connection goes back to
// the pool. Errors come unwrapped, for the caller to name the operation.
func (sc *script) run(ctx context.Context, db *sqlx.DB) (scriptResult, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return scriptResult{}, err
	}
	defer conn.Close()
	res, err := sc.exec(ctx, conn)
	if err != nil {
		if _, rbErr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rbErr != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn }) // never reuse it
		}
	}
	return res, err
}

// contendedTries bounds how often a script that met a deadlock or a lock
// wait timeout is run again.
const contendedTries = 3

// runContended is run, made again (up to contendedTries in all) while the
// script loses lock races: deadlocks, lock wait timeouts, and Galera's lost
// certifications, which it reports as deadlocks. Each such attempt was
// rolled back whole, so running it again is exact: the script's guards
// decide afresh.
func (sc *script) runContended(ctx context.Context, db *sqlx.DB) (scriptResult, error) {
	res, err := sc.run(ctx, db)
	for try := 1; isContention(err) && try < contendedTries; try++ {
		res, err = sc.run(ctx, db)
	}
	return res, err
}

// exec sends the script on a connection the caller holds, as one packet,
// and leaves what a failure left open to the caller.
func (sc *script) exec(ctx context.Context, conn *sql.Conn) (scriptResult, error) {
	named := make([]driver.NamedValue, len(sc.args))
	for i, a := range sc.args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return scriptResult{}, fmt.Errorf("argument %d: %w", i+1, err)
		}
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	query := sc.q.String()
	var res mysql.Result
	err := conn.Raw(func(dc any) error {
		r, err := dc.(driver.ExecerContext).ExecContext(ctx, query, named)
		if err != nil {
			return err
		}
		res = r.(mysql.Result)
		return nil
	})
	if err != nil {
		return scriptResult{}, err
	}
	return scriptResult{rows: res.AllRowsAffected(), ids: res.AllLastInsertIds()}, nil
}
