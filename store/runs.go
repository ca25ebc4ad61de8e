package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
)

var _ runtime.Store = (*Store)(nil)

// runColumns selects a run of the table aliased r; NULLs become zero
// values so rows scan into runtime.Run directly.
const runColumns = `r.id, r.configuration_id, r.owner_id, r.origin, r.status, r.turn, r.conversation_turn,
	COALESCE(r.turn_digest, '') AS turn_digest, r.state, COALESCE(r.claimed_by, '') AS claimed_by,
	r.lease_expires_at, COALESCE(r.pending_effect, '') AS pending_effect, r.cancel_requested,
	COALESCE(r.termination_reason, '') AS termination_reason, r.prompt, COALESCE(r.title, '') AS title, r.title_source, COALESCE(r.answer, '') AS answer,
	r.iterations, r.input_tokens, r.output_tokens, r.created_at, r.updated_at, r.waiting_since,
	r.decision_deadline, r.erased_at, r.erased_by`

// votesColumns select, beside runColumns, how many approvals a run's turn
// needs. The votes themselves are read apart (readVotes), for the runs
// whose turn needs several: as a subquery here they cost every read of a
// run, votes or not, about 50 µs of MariaDB's CPU to plan, which took
// durable decisions under 2,000/s.
const votesColumns = `COALESCE(r.approvals_required, 0) AS approvals_required`

// readVotes reads the votes on the current turn of those runs whose turn
// needs several approvals, oldest first (a vote whose user was deleted
// reads with no name): nothing at all when none does. A run's votes are
// the ones on the digest it was read with.
func readVotes(ctx context.Context, db sqlx.QueryerContext, runs ...*runtime.Run) error {
	byID := map[int64]*runtime.Run{}
	var ids []any
	for _, r := range runs {
		if r.ApprovalsRequired > 1 {
			r.Votes = runtime.Votes{}
			byID[r.ID] = r
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	var rows []struct {
		RunID  int64     `db:"run_id"`
		Digest string    `db:"turn_digest"`
		UserID int64     `db:"user_id"`
		User   string    `db:"user"`
		At     time.Time `db:"voted_at"`
	}
	err := sqlx.SelectContext(ctx, db, &rows, `SELECT v.run_id, v.turn_digest, v.user_id, COALESCE(u.name, '') AS user, v.voted_at
		FROM votes v LEFT JOIN users u ON u.id = v.user_id
		WHERE v.run_id IN (`+placeholders(len(ids))+`) ORDER BY v.voted_at, v.user_id`, ids...)
	if err != nil {
		return fmt.Errorf("store: read votes: %w", err)
	}
	for _, v := range rows {
		if r := byID[v.RunID]; r.TurnDigest == v.Digest {
			r.Votes = append(r.Votes, runtime.Vote{UserID: v.UserID, User: v.User, At: v.At})
		}
	}
	return nil
}

// notErased keeps erased runs (see EraseRun) out of a read of runs r:
// but for the history, an erased run reads as one that does not exist.
const notErased = `r.erased_at IS NULL`

// Run returns a run, or runtime.ErrNotFound, also for an erased run.
func (s *Store) Run(ctx context.Context, id int64) (*runtime.Run, error) {
	return s.run(ctx, s.db, id)
}

// run reads a run through a pool: the store's, or the one of the reads
// that wait for a cluster (see RunSynced).
func (s *Store) run(ctx context.Context, db *sqlx.DB, id int64) (*runtime.Run, error) {
	var r runtime.Run
	err := db.GetContext(ctx, &r, `SELECT `+runColumns+`, `+votesColumns+` FROM runs r WHERE r.id = ? AND `+notErased, id)
	if err != nil {
		return nil, notFound(fmt.Sprintf("run %d", id), err)
	}
	if err := readVotes(ctx, db, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// RunForDecision returns a run with its configuration in one round trip,
// for the decision pipeline, which needs both before its claim, and
// whether its owner still exists; the configuration is nil when it no
// longer exists. runtime.ErrNotFound for no run, or an erased one.
func (s *Store) RunForDecision(ctx context.Context, id int64) (*runtime.Run, *runtime.Configuration, error) {
	var row struct {
		runtime.Run
		Active     *bool  `db:"configuration_active"`
		Definition []byte `db:"configuration_definition"`
	}
	err := s.db.GetContext(ctx, &row, `
		SELECT r.*, c.active AS configuration_active, c.definition AS configuration_definition,
			u.id IS NULL AS owner_deleted
		FROM (SELECT `+runColumns+`, `+votesColumns+` FROM runs r WHERE r.id = ? AND `+notErased+`) AS r
		LEFT JOIN configurations c ON c.id = r.configuration_id
		LEFT JOIN users u ON u.id = r.owner_id`, id)
	if err != nil {
		return nil, nil, notFound(fmt.Sprintf("run %d", id), err)
	}
	if err := readVotes(ctx, s.db, &row.Run); err != nil {
		return nil, nil, err
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

// CreateRun inserts a run and sets its ID. A running run starts claimed by
// r.ClaimedBy with a lease of the given length; a queued one unclaimed.
// Its content is sealed for the id the INSERT made, so the row goes in
// with an empty state and prompt, and gets them, with its first transcript
// messages, in the same transaction.
func (s *Store) CreateRun(ctx context.Context, r *runtime.Run, lease time.Duration, content func(id int64) (runtime.NewRunContent, error)) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: create run: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `
		INSERT INTO runs (configuration_id, owner_id, origin, status, state, claimed_by,
			lease_expires_at, prompt)
		VALUES (?, ?, ?, ?, '', NULLIF(?, ''), IF(? = '', NULL, NOW(6) + INTERVAL ? MICROSECOND), '')`,
		r.ConfigurationID, r.OwnerID, r.Origin, r.Status, r.ClaimedBy, r.ClaimedBy, micros(lease))
	if err != nil {
		return fmt.Errorf("store: create run: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return fmt.Errorf("store: create run: %w", err)
	}
	c, err := content(id)
	if err != nil {
		return fmt.Errorf("store: create run: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET state = ?, prompt = ?, title = ? WHERE id = ?`,
		c.State, []byte(c.Prompt), []byte(c.Title), id); err != nil {
		return fmt.Errorf("store: create run: %w", err)
	}
	if len(c.Messages) > 0 {
		// One INSERT for them all: one round trip however many there are.
		q := "INSERT INTO run_messages (run_id, idx, body) VALUES " + strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(c.Messages)), ", ")
		args := make([]any, 0, 3*len(c.Messages))
		for i, m := range c.Messages {
			args = append(args, id, i, m)
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("store: create run: messages: %w", err)
		}
	}
	if c.Started != nil {
		// The store writes what it is given: the engine's runs open with
		// their first turn.
		if err := insertEvent(ctx, tx, id, runtime.Event{Seq: 1, Turn: 1, Kind: runtime.KindTurnStarted, Payload: c.Started}); err != nil {
			return fmt.Errorf("store: create run: %w", err)
		}
	}
	if err := insertChanges(ctx, tx, runChange{runID: id, change: runtime.ChangeStarted, status: r.Status}); err != nil {
		return fmt.Errorf("store: create run: %w", err)
	}
	if c.Credential != nil && r.ClaimedBy != "" {
		q, args := mintStatement("", id, r.ClaimedBy, c.Credential)
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("store: create run: credential: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: create run: %w", err)
	}
	r.ID, r.State, r.Prompt, r.Title, r.ConversationTurn = id, c.State, c.Prompt, c.Title, 1
	return nil
}

// Resume returns in one round trip what the holder of a claimed run needs
// beyond its row: the last event seq, the sealed transcript (when asked
// for) and the tools approved for the whole run. The three parts are three
// statements of one script, read as three result sets: one UNION ALL with
// an ORDER BY would have MySQL build a temporary table for every
// continuation's start (on the path of every streamed decision's first
// line), where each SELECT here is read straight from its index.
func (s *Store) Resume(ctx context.Context, runID int64, withMessages bool) (runtime.Resumed, error) {
	var r runtime.Resumed
	fail := func(err error) (runtime.Resumed, error) {
		return runtime.Resumed{}, fmt.Errorf("store: resume run %d: %w", runID, err)
	}
	// Whether the owner still exists rides along with the last seq: two
	// primary-key lookups, no round trip of their own.
	rows, err := s.db.QueryContext(ctx, `
		SELECT COALESCE(MAX(seq), 0),
			NOT EXISTS (SELECT 1 FROM runs r JOIN users u ON u.id = r.owner_id WHERE r.id = ?)
			FROM run_events WHERE run_id = ?;
		SELECT body FROM run_messages WHERE run_id = ? AND ? ORDER BY idx;
		SELECT tool_name FROM standing_approvals WHERE run_id = ? ORDER BY tool_name`, runID, runID, runID, withMessages, runID)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	for part := 0; ; part++ {
		for rows.Next() {
			var body []byte
			switch part {
			case 0:
				err = rows.Scan(&r.LastSeq, &r.OwnerDeleted)
			case 1:
				if err = rows.Scan(&body); err == nil {
					r.Messages = append(r.Messages, body)
				}
			default:
				if err = rows.Scan(&body); err == nil {
					r.Standing = append(r.Standing, string(body))
				}
			}
			if err != nil {
				return fail(err)
			}
		}
		if part == 2 || !rows.NextResultSet() {
			break
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	return r, nil
}
