package store

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
)

var _ runtime.Store = (*Store)(nil)

// runColumns selects a run; NULLs become zero values so rows scan into
// runtime.Run directly.
const runColumns = `id, configuration_id, owner_id, origin, status, turn,
	COALESCE(turn_digest, '') AS turn_digest, state, COALESCE(claimed_by, '') AS claimed_by,
	lease_expires_at, COALESCE(pending_effect, '') AS pending_effect, cancel_requested,
	COALESCE(termination_reason, '') AS termination_reason, prompt, COALESCE(answer, '') AS answer,
	iterations, input_tokens, output_tokens, created_at, updated_at, waiting_since`

// micros turns a lease into the microseconds MySQL's INTERVAL takes; leases
// are computed on the database's clock so that every process agrees on
// when one expired.
func micros(d time.Duration) int64 { return d.Microseconds() }

// Run returns a run, or runtime.ErrNotFound.
func (s *Store) Run(ctx context.Context, id int64) (*runtime.Run, error) {
	var r runtime.Run
	err := s.db.GetContext(ctx, &r, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id)
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
		FROM (SELECT `+runColumns+` FROM runs WHERE id = ?) AS r
		LEFT JOIN configurations c ON c.id = r.configuration_id`, id)
	if err != nil {
		return nil, nil, notFound(fmt.Sprintf("run %d", id), err)
	}
	if row.Active == nil {
		return &row.Run, nil, nil
	}
	cfg, err := configurationRow{ID: row.ConfigurationID, Active: *row.Active, Definition: row.Definition}.configuration()
	if err != nil {
		return nil, nil, err
	}
	return &row.Run, cfg, nil
}

// WaitingRuns lists runs waiting for a decision, oldest first: the
// interactive ones, and process runs too when withProcess; ownerID 0 lists
// everyone's.
func (s *Store) WaitingRuns(ctx context.Context, ownerID int64, withProcess bool, limit int) ([]*runtime.Run, error) {
	var runs []*runtime.Run
	err := s.db.SelectContext(ctx, &runs, `
		SELECT `+runColumns+` FROM runs
		WHERE status IN ('waiting_for_approval', 'waiting_for_input')
			AND (origin = 'interactive' OR ?) AND (? = 0 OR owner_id = ?)
		ORDER BY waiting_since, id LIMIT ?`, withProcess, ownerID, ownerID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: waiting runs: %w", err)
	}
	return runs, nil
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
// for) and the tools approved for the whole run. The three parts come as
// one result, told apart by its first column.
func (s *Store) Resume(ctx context.Context, runID int64, withMessages bool) (runtime.Resumed, error) {
	var r runtime.Resumed
	rows, err := s.db.QueryContext(ctx, `
		SELECT 0 AS part, COALESCE(MAX(seq), 0) AS n, NULL AS body FROM run_events WHERE run_id = ?
		UNION ALL SELECT 1, idx, body FROM run_messages WHERE run_id = ? AND ?
		UNION ALL SELECT 2, 0, tool_name FROM standing_approvals WHERE run_id = ?
		ORDER BY part, n`, runID, runID, withMessages, runID)
	if err != nil {
		return r, fmt.Errorf("store: resume run %d: %w", runID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var part, n int
		var body []byte
		if err := rows.Scan(&part, &n, &body); err != nil {
			return r, fmt.Errorf("store: resume run %d: %w", runID, err)
		}
		switch part {
		case 0:
			r.LastSeq = n
		case 1:
			r.Messages = append(r.Messages, body)
		default:
			r.Standing = append(r.Standing, string(body))
		}
	}
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("store: resume run %d: %w", runID, err)
	}
	return r, nil
}

// Claim moves a waiting run on and records its decision in one
// transaction. The turn digest is part of the guard, so a form rendered for
// an earlier turn can never claim a later one; the decisions table's unique
// key on (run_id, turn_digest) makes a second decision of one turn
// impossible even if the guard were wrong.
func (s *Store) Claim(ctx context.Context, c runtime.Claim) error {
	// One transaction in one round trip, like a step's Commit: the claim
	// is on the path of every decision, before its first line. The row is
	// locked through its primary key before the guarded UPDATE: many
	// deciders racing for one run then queue on that one lock. Left to the
	// UPDATE alone, InnoDB also takes locks on the status indexes the
	// winner rewrites, and reports deadlocks among the racers. Every write
	// after the UPDATE is chained on the statement before it (ROW_COUNT()),
	// so it happens only if the UPDATE won.
	d := c.Decision
	var q strings.Builder
	q.WriteString("START TRANSACTION;\n")
	q.WriteString("SELECT id INTO @locked FROM runs WHERE id = ? FOR UPDATE;\n")
	args := []any{c.RunID}
	q.WriteString(`UPDATE runs SET status = ?, claimed_by = NULLIF(?, ''),
			lease_expires_at = IF(? = '', NULL, NOW(6) + INTERVAL ? MICROSECOND),
			decided_at = NOW(6), waiting_since = NULL, updated_at = NOW(6)
		WHERE id = ? AND status = ? AND turn_digest = ?;` + "\n")
	args = append(args, c.To, c.ClaimedBy, c.ClaimedBy, micros(c.Lease), c.RunID, c.From, c.Digest)
	q.WriteString(`INSERT INTO decisions (run_id, turn_digest, kind, scope, reason, input, decided_by, path)
		SELECT ?, ?, ?, ?, ?, ?, ?, ? FROM DUAL WHERE ROW_COUNT() = 1;` + "\n")
	args = append(args, c.RunID, c.Digest, d.Kind, d.Scope, []byte(d.Reason), nullJSON(d.Input), d.DecidedBy, d.Path)
	standing := make([][]any, len(c.Standing))
	for i, tool := range c.Standing {
		standing[i] = []any{c.RunID, tool, d.DecidedBy}
	}
	args = guardedRows(&q, args, "INSERT IGNORE INTO standing_approvals (run_id, tool_name, granted_by)", "ROW_COUNT() = 1", standing)
	q.WriteString("COMMIT")
	res, err := s.script(ctx, q.String(), args)
	if isDuplicate(err) {
		return fmt.Errorf("store: claim run %d: %w", c.RunID, runtime.ErrClaimLost)
	}
	if err != nil {
		return fmt.Errorf("store: claim run %d: %w", c.RunID, err)
	}
	// The statements: START, SELECT … FOR UPDATE, the UPDATE, …
	if res.AllRowsAffected()[2] != 1 {
		return fmt.Errorf("store: claim run %d: %w", c.RunID, runtime.ErrClaimLost)
	}
	return nil
}

// Commit records one step in one transaction and one round trip: the
// holder-guarded UPDATE of the run (lease, checkpoint, and the next status
// when the step suspends or settles it), the event, the step's new
// transcript messages and the decision's bookkeeping travel as one
// multi-statement packet. Each write after the UPDATE runs only if the
// guard held, so a holder that lost its lease writes nothing. The UPDATE
// also hands back the cancel flag through LAST_INSERT_ID(expr), which
// arrives in the same OK packet: checking for cancellation at every step
// boundary costs nothing extra.
func (s *Store) Commit(ctx context.Context, c runtime.Commit) (bool, error) {
	set, args := runUpdate(c)
	cancelGuard := ""
	if c.Status.Waiting() {
		// A cancel request wins over a suspension: nobody should be asked
		// to decide a run its owner cancelled.
		cancelGuard = " AND cancel_requested = 0"
	}
	var q strings.Builder
	q.WriteString("START TRANSACTION;\nUPDATE runs SET " + set +
		", cancel_requested = LAST_INSERT_ID(cancel_requested) WHERE id = ? AND status = 'running' AND claimed_by = ?" + cancelGuard + ";\n")
	args = append(args, c.RunID, c.ClaimedBy)
	// On a plain step the event and the messages are chained on the
	// statement before them, which wrote rows only if the UPDATE held
	// (ROW_COUNT() of the messages' INSERT sees the event's). The
	// decision's bookkeeping may rightly change no row, so a step that
	// carries it keeps the UPDATE's count in @held instead: one statement
	// more, on the rare steps only.
	held := "ROW_COUNT() = 1"
	if c.Executed != "" || c.Outcome != "" {
		q.WriteString("SET @held = ROW_COUNT();\n")
		held = "@held = 1"
	}
	e := c.Event
	if e.Kind != "" {
		q.WriteString(`INSERT INTO run_events (run_id, seq, kind, round, duration_ms, payload)
			SELECT ?, ?, ?, ?, ?, ? FROM DUAL WHERE ` + held + ";\n")
		args = append(args, c.RunID, e.Seq, e.Kind, e.Round, e.DurationMS, []byte(e.Payload))
	}
	messages := make([][]any, len(c.Messages))
	for i, m := range c.Messages {
		messages[i] = []any{c.RunID, c.FirstMessage + i, m}
	}
	args = guardedRows(&q, args, "INSERT INTO run_messages (run_id, idx, body)", held, messages)
	if c.Executed != "" {
		q.WriteString(`UPDATE decisions SET executed_at = NOW(6)
			WHERE run_id = ? AND turn_digest = ? AND executed_at IS NULL AND @held = 1;` + "\n")
		args = append(args, c.RunID, c.Executed)
	}
	if c.Outcome != "" {
		q.WriteString(`UPDATE decisions SET outcome = ? WHERE run_id = ? AND turn_digest = ? AND @held = 1;` + "\n")
		args = append(args, c.Outcome, c.RunID, c.OutcomeDigest)
	}
	q.WriteString("COMMIT")
	res, err := s.script(ctx, q.String(), args)
	if isDuplicate(err) {
		// Only the holder appends; a clash means another holder did.
		return false, fmt.Errorf("store: append event %d of run %d: %w", e.Seq, c.RunID, runtime.ErrLeaseLost)
	}
	if err != nil {
		return false, fmt.Errorf("store: commit step of run %d: %w", c.RunID, err)
	}
	affected, ids := res.AllRowsAffected(), res.AllLastInsertIds()
	if affected[1] == 1 {
		return ids[1] != 0, nil
	}
	// The guard said no: find out whether a cancel stopped a suspension or
	// the run is no longer ours.
	r, err := s.Run(ctx, c.RunID)
	if err != nil {
		return false, err
	}
	if r.Status == runtime.StatusRunning && r.ClaimedBy == c.ClaimedBy && r.CancelRequested {
		return true, fmt.Errorf("store: suspend run %d: %w", c.RunID, runtime.ErrCancelRequested)
	}
	return false, fmt.Errorf("store: commit step of run %d: %w", c.RunID, runtime.ErrLeaseLost)
}

// guardedRows writes one INSERT of rows into a script, each row a SELECT
// that yields it only while guard holds, and returns args with the rows'
// values appended; no rows, no statement.
func guardedRows(q *strings.Builder, args []any, insert, guard string, rows [][]any) []any {
	if len(rows) == 0 {
		return args
	}
	q.WriteString(insert)
	for i, row := range rows {
		if i > 0 {
			q.WriteString(" UNION ALL")
		}
		q.WriteString(" SELECT " + strings.Repeat("?, ", len(row)-1) + "? FROM DUAL WHERE " + guard)
		args = append(args, row...)
	}
	q.WriteString(";\n")
	return args
}

// runUpdate is the SET clause of a step's UPDATE and its arguments. A step
// that keeps the run running renews the lease; one that suspends opens a
// new turn; one that settles or hands the run back releases the claim. The
// state is written only when the step changed it (most tool steps do not).
func runUpdate(c runtime.Commit) (string, []any) {
	var set string
	var args []any
	switch {
	case c.Status.Waiting():
		set = `status = ?, turn = turn + 1, turn_digest = ?, claimed_by = NULL,
			lease_expires_at = NULL, pending_effect = NULL, waiting_since = NOW(6)`
		args = []any{c.Status, c.TurnDigest}
	case c.Status == runtime.StatusDecided || c.Status == runtime.StatusQueued:
		// Handed back for a worker to finish (a draining server).
		set = `status = ?, claimed_by = NULL, lease_expires_at = NULL, pending_effect = NULL,
			decided_at = COALESCE(decided_at, NOW(6))`
		args = []any{c.Status}
	case c.Status.Terminal():
		set = `status = ?, claimed_by = NULL, lease_expires_at = NULL, pending_effect = NULL,
			termination_reason = NULLIF(?, ''), answer = ?`
		args = []any{c.Status, c.TerminationReason, []byte(c.Answer)}
	default:
		set = `lease_expires_at = NOW(6) + INTERVAL ? MICROSECOND, pending_effect = NULLIF(?, '')`
		args = []any{micros(c.Lease), c.PendingEffect}
	}
	if c.State != nil {
		set += ", state = ?"
		args = append(args, c.State)
	}
	set += ", iterations = ?, input_tokens = ?, output_tokens = ?, updated_at = NOW(6)"
	return set, append(args, c.Iterations, c.Usage.InputTokens, c.Usage.OutputTokens)
}

// script runs a multi-statement script on one connection and returns the
// per-statement results. A script that fails part-way may leave its
// transaction open: it is rolled back before the connection goes back to
// the pool.
func (s *Store) script(ctx context.Context, query string, args []any) (mysql.Result, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+1, err)
		}
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	var res mysql.Result
	err = conn.Raw(func(dc any) error {
		r, err := dc.(driver.ExecerContext).ExecContext(ctx, query, named)
		if err != nil {
			return err
		}
		res = r.(mysql.Result)
		return nil
	})
	if err != nil {
		if _, rbErr := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); rbErr != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn }) // never reuse it
		}
		return nil, err
	}
	return res, nil
}

func insertEvent(ctx context.Context, tx sqlx.ExtContext, runID int64, e runtime.Event) error {
	_, err := tx.ExecContext(ctx, `
		INSERT INTO run_events (run_id, seq, kind, round, duration_ms, payload)
		VALUES (?, ?, ?, ?, ?, ?)`,
		runID, e.Seq, e.Kind, e.Round, e.DurationMS, []byte(e.Payload))
	if isDuplicate(err) {
		// Only the holder appends; a clash means another holder did.
		return fmt.Errorf("store: append event %d of run %d: %w", e.Seq, runID, runtime.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("store: append event %d of run %d: %w", e.Seq, runID, err)
	}
	return nil
}

// leaseBatch bounds the runs one lease renewal statement names.
const leaseBatch = 500

// RenewLeases extends the leases of many held runs, a batch per statement,
// and returns the runs that their holder no longer holds. Each run is
// renewed only while it runs under the very claim named (id and holder
// together); the plain id list beside the pairs gives MySQL the primary
// key to go by.
func (s *Store) RenewLeases(ctx context.Context, held []runtime.Lease, lease time.Duration) ([]int64, error) {
	var lost []int64
	for batch := range slices.Chunk(held, leaseBatch) {
		ids := strings.Repeat("?, ", len(batch)-1) + "?"
		pairs := strings.Repeat("(?, ?), ", len(batch)-1) + "(?, ?)"
		where := `status = 'running' AND id IN (` + ids + `) AND (id, claimed_by) IN (` + pairs + `)`
		args := make([]any, 0, 3*len(batch))
		for _, l := range batch {
			args = append(args, l.RunID)
		}
		for _, l := range batch {
			args = append(args, l.RunID, l.ClaimedBy)
		}
		res, err := s.db.ExecContext(ctx, `UPDATE runs SET lease_expires_at = NOW(6) + INTERVAL ? MICROSECOND
			WHERE `+where, append([]any{micros(lease)}, args...)...)
		if err != nil {
			return lost, fmt.Errorf("store: renew %d leases: %w", len(batch), err)
		}
		if n, err := res.RowsAffected(); err == nil && int(n) == len(batch) {
			continue
		}
		// Some claim moved on: find out which of them are still held.
		var still []int64
		if err := s.db.SelectContext(ctx, &still, `SELECT id FROM runs WHERE `+where, args...); err != nil {
			return lost, fmt.Errorf("store: renew %d leases: %w", len(batch), err)
		}
		for _, l := range batch {
			if !slices.Contains(still, l.RunID) {
				lost = append(lost, l.RunID)
			}
		}
	}
	return lost, nil
}

// MarkPendingEffect stamps the call whose write is about to run.
func (s *Store) MarkPendingEffect(ctx context.Context, runID int64, claimedBy, callID string, lease time.Duration) error {
	res, err := s.db.ExecContext(ctx, `
		UPDATE runs SET pending_effect = ?, lease_expires_at = NOW(6) + INTERVAL ? MICROSECOND
		WHERE id = ? AND status = 'running' AND claimed_by = ?`, callID, micros(lease), runID, claimedBy)
	if err := oneRow(res, err, runtime.ErrLeaseLost); err != nil {
		return fmt.Errorf("store: mark pending effect of run %d: %w", runID, err)
	}
	return nil
}

// TakeOver hands a running run whose lease expired to a new holder. It is
// how a worker recovers a continuation whose request or process died;
// ErrClaimLost when the lease is still alive or someone else took it.
func (s *Store) TakeOver(ctx context.Context, runID int64, claimedBy string, lease time.Duration) error {
	res, err := s.db.ExecContext(ctx, `
		UPDATE runs SET claimed_by = ?, lease_expires_at = NOW(6) + INTERVAL ? MICROSECOND,
			updated_at = NOW(6)
		WHERE id = ? AND status = 'running' AND lease_expires_at < NOW(6)`,
		claimedBy, micros(lease), runID)
	if err := oneRow(res, err, runtime.ErrClaimLost); err != nil {
		return fmt.Errorf("store: take over run %d: %w", runID, err)
	}
	return nil
}

// LastSeq returns the highest event seq of a run, 0 when it has none.
func (s *Store) LastSeq(ctx context.Context, runID int64) (int, error) {
	var seq int
	err := s.db.GetContext(ctx, &seq, `SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = ?`, runID)
	if err != nil {
		return 0, fmt.Errorf("store: last seq of run %d: %w", runID, err)
	}
	return seq, nil
}

// Events returns a run's events after a seq, in order.
func (s *Store) Events(ctx context.Context, runID int64, afterSeq int) ([]runtime.Event, error) {
	var evs []runtime.Event
	err := s.db.SelectContext(ctx, &evs, `
		SELECT run_id, seq, kind, round, duration_ms, payload, created_at
		FROM run_events WHERE run_id = ? AND seq > ? ORDER BY seq`, runID, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("store: events of run %d: %w", runID, err)
	}
	return evs, nil
}

// Decision returns the decision recorded for a turn, or runtime.ErrNotFound.
func (s *Store) Decision(ctx context.Context, runID int64, digest string) (*runtime.DecisionRecord, error) {
	var d runtime.DecisionRecord
	err := s.db.GetContext(ctx, &d, `
		SELECT d.run_id, d.turn_digest, d.kind, d.scope, d.reason, COALESCE(d.input, '') AS input,
			d.decided_by, COALESCE(u.name, '') AS decider_name, d.decided_at, d.path
		FROM decisions d LEFT JOIN users u ON u.id = d.decided_by
		WHERE d.run_id = ? AND d.turn_digest = ?`, runID, digest)
	if err != nil {
		return nil, notFound(fmt.Sprintf("decision of run %d", runID), err)
	}
	return &d, nil
}

// RequestCancel flags a running run; its holder cancels it at the next step
// boundary.
func (s *Store) RequestCancel(ctx context.Context, runID int64) error {
	res, err := s.db.ExecContext(ctx, `
		UPDATE runs SET cancel_requested = 1, updated_at = NOW(6)
		WHERE id = ? AND status = 'running'`, runID)
	if err := oneRow(res, err, runtime.ErrClaimLost); err != nil {
		return fmt.Errorf("store: request cancel of run %d: %w", runID, err)
	}
	return nil
}

// CancelIdle cancels a run that nobody holds and appends its events, which
// take the next seqs: the status guard locks the row, so no holder can
// append in between.
func (s *Store) CancelIdle(ctx context.Context, runID int64, from runtime.Status, events []runtime.Event) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `
		UPDATE runs SET status = 'cancelled', termination_reason = 'cancelled', claimed_by = NULL,
			lease_expires_at = NULL, turn_digest = NULL, waiting_since = NULL, updated_at = NOW(6)
		WHERE id = ? AND status = ?`, runID, from)
	if err := oneRow(res, err, runtime.ErrClaimLost); err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	var seq int
	if err := tx.GetContext(ctx, &seq, `SELECT COALESCE(MAX(seq), 0) FROM run_events WHERE run_id = ?`, runID); err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	for _, e := range events {
		seq++
		e.Seq = seq
		if err := insertEvent(ctx, tx, runID, e); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `
		UPDATE decisions SET outcome = 'cancelled' WHERE run_id = ? AND outcome IS NULL`, runID); err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: cancel run %d: %w", runID, err)
	}
	return nil
}

// oneRow turns an UPDATE's result into nil when it changed exactly one row
// and into lost when it changed none: the guard said no.
func oneRow(res interface{ RowsAffected() (int64, error) }, err error, lost error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return lost
	}
	return nil
}

// nullJSON is a JSON column's value: NULL for none. Run content goes to
// MySQL as bytes, never as text: sealed content is binary, and the
// driver's interpolation marks bytes as such.
func nullJSON(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return []byte(raw)
}
