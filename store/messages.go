package store

import (
	"context"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Messages returns a run's stored transcript messages with an index above
// r.AfterIdx, in index order, at most r.Limit, only those of turns
// r.FromTurn to r.ToTurn when either is set. Turns only grow with the
// index, so a window of turns is one range of the primary key: the
// range is found first from the rows' index and turn (a long body is
// stored off the row and not read), then only its bodies are read.
func (s *Store) Messages(ctx context.Context, runID int64, r runtime.MessageRange) ([]runtime.StoredMessage, error) {
	fail := func(err error) ([]runtime.StoredMessage, error) {
		return nil, fmt.Errorf("store: messages of run %d: %w", runID, err)
	}
	from, to := r.AfterIdx, 1<<31-1
	if r.FromTurn > 0 || r.ToTurn > 0 {
		last := r.ToTurn
		if last <= 0 {
			last = 1<<31 - 1
		}
		var bounds struct {
			First *int `db:"first"`
			Last  *int `db:"last"`
		}
		if err := s.reads().GetContext(ctx, &bounds, `
			SELECT MIN(idx) AS first, MAX(idx) AS last FROM run_messages
			WHERE run_id = ? AND idx > ? AND turn BETWEEN ? AND ?`,
			runID, r.AfterIdx, r.FromTurn, last); err != nil {
			return fail(err)
		}
		if bounds.First == nil {
			return []runtime.StoredMessage{}, nil
		}
		from, to = *bounds.First-1, *bounds.Last
	}
	out := []runtime.StoredMessage{}
	if err := s.reads().SelectContext(ctx, &out, `
		SELECT idx, turn, body, created_at FROM run_messages
		WHERE run_id = ? AND idx > ? AND idx <= ?
		ORDER BY idx LIMIT ?`, runID, from, to, r.Limit); err != nil {
		return fail(err)
	}
	return out, nil
}
