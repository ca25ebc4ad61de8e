package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
)

// WaitingPage lists up to q.Limit runs waiting for a decision, oldest
// first from q.After, with their owner's name, and counts how many wait
// that q matches in all. The status index (status, waiting_since) serves
// both; the cursor is the (waiting_since, id) of the last run of the page
// before, so a page starts where the last one ended however many runs
// were decided meanwhile.
func (s *Store) WaitingPage(ctx context.Context, q runtime.WaitingQuery) ([]*runtime.Run, int, error) {
	where := []string{"r.status IN ('waiting_for_approval', 'waiting_for_input')"}
	var args []any
	if !q.WithProcess {
		where = append(where, "r.origin = 'interactive'")
	}
	if q.OwnerID != 0 {
		where, args = append(where, "r.owner_id = ?"), append(args, q.OwnerID)
	}
	if q.ConfigurationID != 0 {
		where, args = append(where, "r.configuration_id = ?"), append(args, q.ConfigurationID)
	}
	if q.Tool != "" {
		where, args = append(where, "FIND_IN_SET(?, r.pending_tools) > 0"), append(args, q.Tool)
	}
	filter := strings.Join(where, " AND ")
	var total int
	if err := s.db.GetContext(ctx, &total, `SELECT COUNT(*) FROM runs r WHERE `+filter, args...); err != nil {
		return nil, 0, fmt.Errorf("store: count waiting runs: %w", err)
	}
	page, pageArgs := filter, args
	if q.After != nil {
		page += " AND (r.waiting_since, r.id) > (?, ?)"
		pageArgs = append(append([]any(nil), args...), q.After.Since, q.After.ID)
	}
	var runs []*runtime.Run
	err := s.db.SelectContext(ctx, &runs, `
		SELECT `+runColumns+`, `+votesColumns+`, COALESCE(u.name, '') AS owner_name
		FROM runs r LEFT JOIN users u ON u.id = r.owner_id
		WHERE `+page+` ORDER BY r.waiting_since, r.id LIMIT ?`, append(pageArgs, q.Limit)...)
	if err != nil {
		return nil, 0, fmt.Errorf("store: waiting runs: %w", err)
	}
	if err := readVotes(ctx, s.db, runs...); err != nil {
		return nil, 0, err
	}
	return runs, total, nil
}

// History lists up to limit runs newest first from q.Before: the viewer's
// own and the ones they decided a turn of, or every run when q.All, each
// with the viewer's latest decision about it.
func (s *Store) History(ctx context.Context, q runtime.HistoryQuery, limit int) ([]runtime.HistoryRow, error) {
	var where []string
	args := []any{q.ViewerID}
	if !q.All {
		where, args = append(where, "(r.owner_id = ? OR d.decided_at IS NOT NULL)"), append(args, q.ViewerID)
	}
	if q.DecidedByMe {
		where = append(where, "d.decided_at IS NOT NULL")
	}
	if q.Status != "" {
		// An erased run is no longer in any status a reader filters by.
		where, args = append(where, "r.status = ? AND r.erased_at IS NULL"), append(args, q.Status)
	}
	if q.ConfigurationID != 0 {
		where, args = append(where, "r.configuration_id = ?"), append(args, q.ConfigurationID)
	}
	if q.OwnerID != 0 {
		where, args = append(where, "r.owner_id = ?"), append(args, q.OwnerID)
	}
	if q.Before != 0 {
		where, args = append(where, "r.id < ?"), append(args, q.Before)
	}
	filter := "TRUE"
	if len(where) > 0 {
		filter = strings.Join(where, " AND ")
	}
	// d is the viewer's latest decision about each run (decided_by, run_id
	// is an index): the runs they decided, and what they decided; pd the
	// latest decision a rule of the policy made (by run_id, the unique
	// key's prefix).
	var rows []runtime.HistoryRow
	err := s.db.SelectContext(ctx, &rows, `
		SELECT `+runColumns+`, `+votesColumns+`, COALESCE(u.name, '') AS owner_name,
			d.kind AS my_kind, d.decided_at AS my_decided_at,
			pd.kind AS rule_kind, pd.policy AS rule_policy, pd.reason AS rule_reason, pd.turn_digest AS rule_digest
		FROM runs r
		LEFT JOIN users u ON u.id = r.owner_id
		LEFT JOIN decisions d ON d.id = (
			SELECT d2.id FROM decisions d2 WHERE d2.run_id = r.id AND d2.decided_by = ?
			ORDER BY d2.decided_at DESC, d2.id DESC LIMIT 1)
		LEFT JOIN decisions pd ON pd.id = (
			SELECT MAX(d3.id) FROM decisions d3 WHERE d3.run_id = r.id AND d3.policy IS NOT NULL)
		WHERE `+filter+` ORDER BY r.id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: run history: %w", err)
	}
	runs := make([]*runtime.Run, len(rows))
	for i := range rows {
		runs[i] = &rows[i].Run
	}
	if err := readVotes(ctx, s.db, runs...); err != nil {
		return nil, err
	}
	return rows, nil
}
