package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
)

// runChange is one row of the feed's change log (run_changes), written in
// the transaction of the step that changed the run: started, waiting,
// decided, settled or erased.
type runChange struct {
	runID     int64
	change    runtime.ChangeKind
	status    runtime.Status
	decision  string // the claim's kind (approve, deny, input)
	decidedBy int64  // 0: nobody (an expiry)
}

func (c runChange) row() []any {
	return []any{c.runID, string(c.change), string(c.status), nullString(c.decision), nullDecider(c.decidedBy)}
}

const insertChangesInto = `INSERT INTO run_changes (run_id, change_kind, status, decision, decided_by)`

// change appends the change-log rows of a script's step. With a guard
// (an SQL condition such as "ROW_COUNT() = 1") each row is written only
// while it holds; without one, the rows go in as plain VALUES, for a
// script whose earlier statement already stops everything when the step
// did not hold. The INSERT is best placed last before the COMMIT: its
// ids become visible to the feed at the commit, and the feed waits a
// grace period for ids that are allocated but not yet committed.
func (sc *script) change(guard string, chs ...runChange) {
	rows := make([][]any, len(chs))
	for i, c := range chs {
		rows[i] = c.row()
	}
	if guard != "" {
		sc.guardedRows(insertChangesInto, guard, rows)
		return
	}
	if len(rows) > 0 {
		sc.add(valuesInsert(insertChangesInto, rows), flatten(rows)...)
	}
}

// insertChanges is change for a transaction of single statements.
func insertChanges(ctx context.Context, tx sqlx.ExtContext, chs ...runChange) error {
	if len(chs) == 0 {
		return nil
	}
	rows := make([][]any, len(chs))
	for i, c := range chs {
		rows[i] = c.row()
	}
	if _, err := tx.ExecContext(ctx, valuesInsert(insertChangesInto, rows), flatten(rows)...); err != nil {
		return fmt.Errorf("change log: %w", err)
	}
	return nil
}

func flatten(rows [][]any) []any {
	var out []any
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

var _ runtime.ChangeStore = (*Store)(nil)

// Changes reads the change log's rows with an id above q.After or inside
// one of q.Gaps, in id order, at most q.Limit, each with what the feed
// tells of its run now (owner, configuration, sealed title, turn) and the
// name of its decider. One statement: the poll of every feed client of a
// process.
func (s *Store) Changes(ctx context.Context, q runtime.ChangeQuery) ([]runtime.RunChange, error) {
	where := "c.id > ?"
	args := []any{q.After}
	for _, g := range q.Gaps {
		where += " OR c.id BETWEEN ? AND ?"
		args = append(args, g.Lo, g.Hi)
	}
	args = append(args, q.Limit)
	// A run row is never deleted (an erase keeps it), but the change is
	// read without one all the same: its id must still close its gap.
	rows := []runtime.RunChange{}
	err := s.db.SelectContext(ctx, &rows, `
		SELECT c.id, c.run_id, c.change_kind, c.status, COALESCE(c.decision, '') AS decision,
			COALESCE(u.name, '') AS decided_by, COALESCE(r.owner_id, 0) AS owner_id,
			COALESCE(cfg.identifier, '') AS configuration, COALESCE(r.title, '') AS title,
			COALESCE(r.conversation_turn, 0) AS turn, r.erased_at IS NOT NULL AS erased
		FROM run_changes c
		LEFT JOIN runs r ON r.id = c.run_id
		LEFT JOIN configurations cfg ON cfg.id = r.configuration_id
		LEFT JOIN users u ON u.id = c.decided_by
		WHERE `+where+`
		ORDER BY c.id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: read the change log after %d: %w", q.After, err)
	}
	return rows, nil
}

// ChangesSettled is the id of the newest of the change log's rows older
// than grace (0 when there is none): a position from which a reader misses
// no row still being committed, on the assumption the feed makes
// everywhere, that no transaction commits its change more than grace
// after writing it. (The newest by created_at, one row read backwards
// from the index, rather than MAX(id), which would read every row of the
// day: ids grow with time on a server, and where they do not, on a
// cluster, neither is exact and the grace covers both.)
func (s *Store) ChangesSettled(ctx context.Context, grace time.Duration) (int64, error) {
	var ids []int64
	err := s.db.SelectContext(ctx, &ids, `SELECT id FROM run_changes
		WHERE created_at < NOW(6) - INTERVAL ? MICROSECOND ORDER BY created_at DESC LIMIT 1`, micros(grace))
	id := int64(0)
	if len(ids) > 0 {
		id = ids[0]
	}
	if err != nil {
		return 0, fmt.Errorf("store: position in the change log: %w", err)
	}
	return id, nil
}

// DeleteOldChanges deletes change-log rows older than runtime.ChangeRetention,
// at most limit of them, oldest first.
func (s *Store) DeleteOldChanges(ctx context.Context, limit int) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM run_changes
		WHERE created_at < NOW(6) - INTERVAL ? MICROSECOND ORDER BY created_at LIMIT ?`,
		micros(runtime.ChangeRetention), limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete old changes: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: delete old changes: %w", err)
	}
	return int(n), nil
}
