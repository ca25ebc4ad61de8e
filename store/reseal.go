package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
)

// sealedTable is a table that holds run content, as state reseal goes
// through it: its primary key (one or two integer columns), the SQL of
// what names a row's place, its sealed columns, and the place of a value.
type sealedTable struct {
	name string
	key  []string
	// run and row select the place's run id and its row (see
	// runtime.Place); k is the row's primary key.
	run, row string
	columns  []string
	place    func(column string, k [2]int64, run int64, row string) runtime.Place
}

// sealedTables are the tables of run content, in the order state reseal
// goes through them.
var sealedTables = []sealedTable{
	{name: "runs", key: []string{"id"}, run: "id", row: "''", columns: []string{"state", "prompt", "title", "answer"},
		place: func(c string, _ [2]int64, run int64, _ string) runtime.Place { return runtime.RunPlace(c, run) }},
	{name: "run_messages", key: []string{"run_id", "idx"}, run: "run_id", row: "''", columns: []string{"body"},
		place: func(_ string, k [2]int64, run int64, _ string) runtime.Place {
			return runtime.MessagePlace(run, int(k[1]))
		}},
	{name: "run_partials", key: []string{"run_id"}, run: "run_id", row: "''", columns: []string{"body"},
		place: func(_ string, _ [2]int64, run int64, _ string) runtime.Place { return runtime.PartialPlace(run) }},
	{name: "run_events", key: []string{"run_id", "seq"}, run: "run_id", row: "''", columns: []string{"payload"},
		place: func(_ string, k [2]int64, run int64, _ string) runtime.Place {
			return runtime.EventPlace(run, int(k[1]))
		}},
	{name: "decisions", key: []string{"id"}, run: "run_id", row: "turn_digest", columns: []string{"reason", "input", "arguments", "calls"},
		place: func(c string, _ [2]int64, run int64, digest string) runtime.Place {
			return runtime.DecisionPlace(c, run, digest)
		}},
	{name: "webhook_deliveries", key: []string{"id"}, run: "run_id", row: "webhook_id", columns: []string{"body"},
		place: func(_ string, _ [2]int64, run int64, id string) runtime.Place { return runtime.DeliveryPlace(run, id) }},
}

// SealedTables names the tables that hold sealed run content, in the
// order Reseal is to go through them.
func SealedTables() []string {
	names := make([]string, len(sealedTables))
	for i, t := range sealedTables {
		names[i] = t.name
	}
	return names
}

// ResealCursor is where a reseal of one table stands: after the primary
// key of the last row it read. The zero cursor is before the first row.
type ResealCursor struct{ key [2]int64 }

// ResealBatch is what one batch of a reseal did.
type ResealBatch struct {
	// Next is the cursor of the next batch.
	Next ResealCursor
	// Rows is how many rows the batch read: fewer than asked for when the
	// table is done.
	Rows int
	// Changed is how many values it rewrote; Moved how many a writer
	// changed between the read and the rewrite, which it left as that
	// writer wrote them.
	Changed, Moved int
}

// Rebind returns a sealed value as it is to be stored at its place, or
// nil to leave it as it is.
type Rebind func(at runtime.Place, value []byte) ([]byte, error)

// Reseal reads up to limit rows of a table of SealedTables after the
// cursor, in primary key order, and hands every value of its sealed
// columns to rebind — but for empty ones and those starting with bound
// (sealed as they are to be already), which the database leaves out, so
// that a reseal run again over a resealed table reads little but keys.
// The rewrites of a batch are one transaction, each guarded by the value
// it replaces: a value that a running server rewrote since the read keeps
// the server's (Moved). A batch is thereby idempotent, and a reseal that
// was interrupted is resumed by running it again. An error of rebind
// stops the batch with nothing written.
func (s *Store) Reseal(ctx context.Context, table string, after ResealCursor, limit int, bound []byte, rebind Rebind) (ResealBatch, error) {
	var t *sealedTable
	for i := range sealedTables {
		if sealedTables[i].name == table {
			t = &sealedTables[i]
		}
	}
	if t == nil {
		return ResealBatch{}, fmt.Errorf("store: reseal: %q holds no sealed content", table)
	}
	fail := func(err error) (ResealBatch, error) {
		return ResealBatch{}, fmt.Errorf("store: reseal %s: %w", table, err)
	}
	q, args := t.batchQuery(after, limit, bound)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	type rewrite struct {
		column   string
		key      [2]int64
		old, new []byte
	}
	var rewrites []rewrite
	b := ResealBatch{Next: after}
	for rows.Next() {
		var k [2]int64
		var run int64
		var row string
		vals := make([][]byte, len(t.columns))
		dest := []any{&k[0], &k[1], &run, &row}
		for i := range vals {
			dest = append(dest, &vals[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return fail(err)
		}
		b.Rows++
		b.Next = ResealCursor{key: k}
		for i, v := range vals {
			if len(v) == 0 {
				continue
			}
			nv, err := rebind(t.place(t.columns[i], k, run, row), v)
			if err != nil {
				return fail(err)
			}
			if nv != nil {
				rewrites = append(rewrites, rewrite{column: t.columns[i], key: k, old: v, new: nv})
			}
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	rows.Close()
	if len(rewrites) == 0 {
		return b, nil
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	where := strings.Join(t.key, " = ? AND ") + " = ?"
	for _, r := range rewrites {
		args := []any{r.new, r.key[0]}
		if len(t.key) == 2 {
			args = append(args, r.key[1])
		}
		res, err := tx.ExecContext(ctx, "UPDATE "+t.name+" SET "+r.column+" = ? WHERE "+where+" AND "+r.column+" = ?",
			append(args, r.old)...)
		if err != nil {
			return fail(err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fail(err)
		} else if n == 1 {
			b.Changed++
		} else {
			b.Moved++
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return b, nil
}

// batchQuery is the SELECT of one batch: the primary key (two columns, the
// second 0 for a one-column key), the place's run and row, and each sealed
// column, NULL where it starts with bound.
func (t *sealedTable) batchQuery(after ResealCursor, limit int, bound []byte) (string, []any) {
	var q strings.Builder
	var args []any
	second := "0"
	if len(t.key) == 2 {
		second = t.key[1]
	}
	fmt.Fprintf(&q, "SELECT %s, %s, %s, %s", t.key[0], second, t.run, t.row)
	for _, c := range t.columns {
		// LEFT of a binary column compares bytes: no LIKE, whose _ and %
		// a key id could hold.
		fmt.Fprintf(&q, ", IF(LEFT(%s, ?) = ?, NULL, %s)", c, c)
		args = append(args, len(bound), bound)
	}
	fmt.Fprintf(&q, " FROM %s WHERE ", t.name)
	if len(t.key) == 1 {
		fmt.Fprintf(&q, "%s > ?", t.key[0])
		args = append(args, after.key[0])
	} else {
		// The first column's range bounds the scan of the primary key;
		// the OR picks up the rest of the row the last batch ended in.
		fmt.Fprintf(&q, "%[1]s >= ? AND (%[1]s > ? OR %[2]s > ?)", t.key[0], t.key[1])
		args = append(args, after.key[0], after.key[0], after.key[1])
	}
	fmt.Fprintf(&q, " ORDER BY %s LIMIT ?", strings.Join(t.key, ", "))
	return q.String(), append(args, limit)
}
