package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

var _ runtime.Store = (*Store)(nil)

// runColumns selects a run of the table aliased r; NULLs become zero
// values so rows scan into runtime.Run directly.
const runColumns = `r.id, r.configuration_id, r.owner_id, r.origin, r.status, r.turn,
	COALESCE(r.turn_digest, '') AS turn_digest, r.state, COALESCE(r.claimed_by, '') AS claimed_by,
	r.lease_expires_at, COALESCE(r.pending_effect, '') AS pending_effect, r.cancel_requested,
	COALESCE(r.termination_reason, '') AS termination_reason, r.prompt, COALESCE(r.answer, '') AS answer,
	r.iterations, r.input_tokens, r.output_tokens, r.created_at, r.updated_at, r.waiting_since,
	r.decision_deadline`

// Run returns a run, or runtime.ErrNotFound.
func (s *Store) Run(ctx context.Context, id int64) (*runtime.Run, error) {
	var r runtime.Run
	err := s.db.GetContext(ctx, &r, `SELECT `+runColumns+` FROM runs r WHERE r.id = ?`, id)
	if err != nil {
		return nil, notFound(fmt.Sprintf("run %d", id), err)
	}
	return &r, nil
}

// RunForDecision returns a run with its configuration in one round trip,
// for the decision pipeline, which needs both before its claim; the
// configuration is nil when it no longer exists. runtime.ErrNotFound for no run.
func (s *Store) RunForDecision(ctx context.Context, id int64) (*runtime.Run, *runtime.Configuration, error) {
	var row struct {
		runtime.Run
		Active     *bool  `db:"configuration_active"`
		Definition []byte `db:"configuration_definition"`
	}
	err := s.db.GetContext(ctx, &row, `
		SELECT r.*, c.active AS configuration_active, c.definition AS configuration_definition
		FROM (SELECT `+runColumns+` FROM runs r WHERE r.id = ?) AS r
		LEFT JOIN configurations c ON c.id = r.configuration_id`, id)
	if err != nil {
		return nil, nil, notFound(fmt.Sprintf("run %d", id), err)
	}
	if row.Active == nil {
		return &row.Run, nil, nil
	}
	cfg, err := s.configs.configuration(configurationRow{ID: row.ConfigurationID, Active: *row.Active, Definition: row.Definition})
	if err != nil {
		return nil, nil, err
	}
	return &row.Run, cfg, nil
}

// CreateRun inserts a run with its first transcript messages and sets its
// ID. A running run starts claimed by r.ClaimedBy with a lease of the given
// length; a queued one unclaimed.
func (s *Store) CreateRun(ctx context.Context, r *runtime.Run, messages [][]byte, lease time.Duration) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: create run: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `
		INSERT INTO runs (configuration_id, owner_id, origin, status, state, claimed_by,
			lease_expires_at, prompt)
		VALUES (?, ?, ?, ?, ?, NULLIF(?, ''), IF(? = '', NULL, NOW(6) + INTERVAL ? MICROSECOND), ?)`,
		r.ConfigurationID, r.OwnerID, r.Origin, r.Status, r.State, r.ClaimedBy,
		r.ClaimedBy, micros(lease), []byte(r.Prompt))
	if err != nil {
		return fmt.Errorf("store: create run: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("store: create run: %w", err)
	}
	for i, m := range messages {
		if _, err := tx.ExecContext(ctx, `INSERT INTO run_messages (run_id, idx, body) VALUES (?, ?, ?)`, id, i, m); err != nil {
			return fmt.Errorf("store: create run: message %d: %w", i, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: create run: %w", err)
	}
	r.ID = id
	return nil
}

// Resume returns in one round trip what the holder of a claimed run needs
// beyond its row: the last event seq, the sealed transcript (when asked
// for) and the tools approved for the whole run. The parts come as one
// result, told apart by its first column. The transcript is the run's
// run_messages rows (what it started with, and the steps' messages
// recorded before they travelled in their events) overlaid by each
// event's messages in seq order, each from its first_message on: an
// edit's rewrite starts within what is already there and replaces the
// rest. There is no ORDER BY: sorting a UNION makes a temporary table, and
// one with a BLOB column is made on disk (MariaDB), a millisecond per
// continuation; the parts are put in order here instead.
func (s *Store) Resume(ctx context.Context, runID int64, withMessages bool) (runtime.Resumed, error) {
	var r runtime.Resumed
	rows, err := s.db.QueryContext(ctx, `
		SELECT 0 AS part, COALESCE(MAX(seq), 0) AS n, 0 AS first, NULL AS body FROM run_events WHERE run_id = ?
		UNION ALL SELECT 1, idx, 0, body FROM run_messages WHERE run_id = ? AND ?
		UNION ALL SELECT 2, 0, 0, tool_name FROM standing_approvals WHERE run_id = ?
		UNION ALL SELECT 3, seq, first_message, messages FROM run_events
			WHERE run_id = ? AND ? AND messages IS NOT NULL`,
		runID, runID, withMessages, runID, runID, withMessages)
	if err != nil {
		return r, fmt.Errorf("store: resume run %d: %w", runID, err)
	}
	defer rows.Close()
	type piece struct {
		n, first int
		body     []byte
	}
	var stored, steps []piece
	for rows.Next() {
		var p piece
		var part int
		if err := rows.Scan(&part, &p.n, &p.first, &p.body); err != nil {
			return r, fmt.Errorf("store: resume run %d: %w", runID, err)
		}
		switch part {
		case 0:
			r.LastSeq = p.n
		case 1:
			stored = append(stored, p)
		case 2:
			r.Standing = append(r.Standing, string(p.body))
		default:
			steps = append(steps, p)
		}
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("store: resume run %d: %w", runID, err)
	}
	byN := func(a, b piece) int { return cmp.Compare(a.n, b.n) }
	slices.SortFunc(stored, byN)
	slices.SortFunc(steps, byN)
	for _, p := range stored {
		r.Messages = append(r.Messages, p.body)
	}
	for _, p := range steps {
		msgs, err := unframeMessages(p.body)
		if err != nil {
			return r, fmt.Errorf("store: resume run %d: messages of event %d: %w", runID, p.n, err)
		}
		if p.first > len(r.Messages) {
			return r, fmt.Errorf("store: resume run %d: the messages of event %d start at %d, after the %d before them",
				runID, p.n, p.first, len(r.Messages))
		}
		r.Messages = append(r.Messages[:p.first:p.first], msgs...)
	}
	slices.Sort(r.Standing)
	return r, nil
}
