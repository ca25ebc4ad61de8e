package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
)

// LastSeq returns the highest event seq of a run, 0 when it has none.
func (s *Store) LastSeq(ctx context.Context, runID int64) (int, error) {
	var seq int
	err := s.reads().GetContext(ctx, &seq, `SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = ?`, runID)
	if err != nil {
		return 0, fmt.Errorf("store: last seq of run %d: %w", runID, err)
	}
	return seq, nil
}

// Events returns a run's events after a seq, in order.
func (s *Store) Events(ctx context.Context, runID int64, afterSeq int) ([]runtime.Event, error) {
	var evs []runtime.Event
	err := s.reads().SelectContext(ctx, &evs, `
		SELECT run_id, seq, turn, kind, round, duration_ms, payload, created_at
		FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq`, runID, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("store: events of run %d: %w", runID, err)
	}
	return evs, nil
}

// insertEventInto starts every INSERT of an event; the VALUES follow it in
// this order.
const insertEventInto = "INSERT INTO run_events (run_id, seq, turn, kind, round, duration_ms, payload) "

// insertEvent appends one event inside a caller's transaction;
// runtime.ErrLeaseLost when its seq is taken.
func insertEvent(ctx context.Context, tx sqlx.ExtContext, runID int64, e runtime.Event) error {
	_, err := tx.ExecContext(ctx, insertEventInto+`
		VALUES (?, ?, ?, ?, ?, ?, ?)`,
		runID, e.Seq, max(e.Turn, 1), e.Kind, e.Round, e.DurationMS, nonNil(e.Payload))
	if isDuplicate(err) {
		// Only the holder appends; a clash means another holder did.
		return fmt.Errorf("store: append event %d of run %d: %w", e.Seq, runID, runtime.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("store: append event %d of run %d: %w", e.Seq, runID, err)
	}
	return nil
}

var _ runtime.FollowStore = (*Store)(nil)

// inListMax is the longest IN list FollowedEvents writes.
const inListMax = 500

// followedRow is a row of FollowedEvents: a run's status (seq 0) or one of
// its events.
type followedRow struct {
	RunID      int64        `db:"run_id"`
	Status     string       `db:"status"`
	Seq        int          `db:"seq"`
	Turn       int          `db:"turn"`
	Kind       string       `db:"kind"`
	Round      int          `db:"round"`
	DurationMS int64        `db:"duration_ms"`
	Payload    []byte       `db:"payload"`
	CreatedAt  sql.NullTime `db:"created_at"`
}

// FollowedEvents reads the statuses of the runs of after and their events
// above after's seqs, at most limit of them, in one statement: a UNION is
// one consistent read, so a status that says a run paused or settled comes
// with every event committed before it. The events' part is one range of
// the primary key (run_id, seq) per run, which InnoDB reads as that many
// short range scans. Seqs start at 1: a status row is told by its seq 0.
func (s *Store) FollowedEvents(ctx context.Context, after map[int64]int, limit int) (runtime.FollowedBatch, error) {
	b := runtime.FollowedBatch{Statuses: make(map[int64]runtime.Status, len(after))}
	if len(after) == 0 {
		return b, nil
	}
	ids := slices.Sorted(maps.Keys(after))
	var q strings.Builder
	args := make([]any, 0, 3*len(ids)+1)
	q.WriteString(`SELECT id AS run_id, status, 0 AS seq, 0 AS turn, '' AS kind, 0 AS round, 0 AS duration_ms,
		'' AS payload, NULL AS created_at FROM runs WHERE (`)
	for i, id := range ids {
		switch {
		case i == 0:
			q.WriteString("id IN (?")
		case i%inListMax == 0:
			// MariaDB turns an IN list of 1,000 values or more into a
			// subquery of a table of values
			// (in_predicate_conversion_threshold); shorter lists stay
			// primary-key lookups on MariaDB and MySQL alike.
			q.WriteString(") OR id IN (?")
		default:
			q.WriteString(", ?")
		}
		args = append(args, id)
	}
	q.WriteString(")")
	q.WriteString(`)
		UNION ALL
		(SELECT run_id, '', seq, turn, kind, round, duration_ms, payload, created_at FROM run_events WHERE `)
	for i, id := range ids {
		if i > 0 {
			q.WriteString(" OR ")
		}
		q.WriteString("(run_id = ? AND seq > ?)")
		args = append(args, id, after[id])
	}
	q.WriteString(` ORDER BY run_id, seq LIMIT ?)`)
	args = append(args, limit)
	var rows []followedRow
	if err := s.reads().SelectContext(ctx, &rows, q.String(), args...); err != nil {
		return b, fmt.Errorf("store: events of %d followed runs: %w", len(after), err)
	}
	for _, r := range rows {
		if r.Seq == 0 {
			b.Statuses[r.RunID] = runtime.Status(r.Status)
			continue
		}
		b.Events = append(b.Events, runtime.Event{RunID: r.RunID, Seq: r.Seq, Turn: r.Turn, Kind: runtime.EventKind(r.Kind),
			Round: r.Round, DurationMS: r.DurationMS, Payload: r.Payload, CreatedAt: r.CreatedAt.Time})
	}
	// The UNION's order is not the events' order: sort them.
	slices.SortFunc(b.Events, func(x, y runtime.Event) int {
		if x.RunID != y.RunID {
			return cmp.Compare(x.RunID, y.RunID)
		}
		return cmp.Compare(x.Seq, y.Seq)
	})
	b.Full = len(b.Events) >= limit
	return b, nil
}
