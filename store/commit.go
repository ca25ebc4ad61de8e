package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Commit records one step in one transaction and one round trip: the
// holder-guarded UPDATE of the run (lease, checkpoint, and the next status
// when the step suspends or settles it), the event, the step's new
// transcript messages and the decision's bookkeeping travel as one
// multi-statement packet. Nothing after the UPDATE is written unless the
// guard held, so a holder that lost its lease writes nothing. The UPDATE
// also hands back the cancel flag through LAST_INSERT_ID(expr), which
// arrives in the same OK packet: checking for cancellation at every step
// boundary costs nothing extra. It reports that flag; runtime.ErrLeaseLost
// when the holder does not hold the run (or another holder appended the
// event's seq), and runtime.ErrCancelRequested, with nothing written, when
// a suspension meets a cancel request.
func (s *Store) Commit(ctx context.Context, c runtime.Commit) (bool, error) {
	set, args := runUpdate(c)
	cancelGuard := ""
	if c.Status.Waiting() {
		// A cancel request wins over a suspension: nobody should be asked
		// to decide a run its owner cancelled.
		cancelGuard = " AND cancel_requested = 0"
	}
	var sc script
	sc.add("START TRANSACTION")
	// FORCE INDEX: the guard names status, and the optimizer otherwise
	// weighs the status indexes against the primary key at every step
	// (index dives), and on a table with few running runs picks one: a
	// range over every running run, locked, instead of one row.
	update := sc.add("UPDATE runs FORCE INDEX (PRIMARY) SET "+set+
		", cancel_requested = LAST_INSERT_ID(cancel_requested) WHERE id = ? AND status = 'running' AND claimed_by = ?"+cancelGuard,
		append(args, c.RunID, c.ClaimedBy)...)
	// The decision's bookkeeping may rightly change no row, so a step that
	// carries it keeps the UPDATE's count in @held: one statement more, on
	// the rare steps only. Otherwise the statement after the UPDATE reads
	// its count with ROW_COUNT().
	held := "ROW_COUNT() = 1"
	change, changed := commitChange(c)
	if c.Executed != "" || c.Outcome != "" || c.Rewrite || len(c.Notifications) > 0 || c.Decision != nil || (changed && c.Event.Kind == "") {
		sc.add("SET @held = ROW_COUNT()")
		held = "@held = 1"
	}
	e := c.Event
	if e.Kind != "" {
		// The event is the guard of the rest: when the UPDATE did not hold,
		// its run_id is NULL, which a single-row INSERT refuses in every
		// sql_mode (error 1048), and MySQL runs no statement of a script
		// after one that failed: not the messages, not the COMMIT. A plain
		// VALUES row costs the server less than a SELECT FROM DUAL WHERE
		// guard, and the statements after it need no guard of their own.
		sc.add(insertEventInto+`
			VALUES (IF(`+held+`, ?, NULL), ?, ?, ?, ?, ?, ?)`,
			c.RunID, e.Seq, turnOf(c), e.Kind, e.Round, e.DurationMS, nonNil(e.Payload))
		// The events before it in seq need no guard: they are written only
		// if its INSERT was.
		for _, t := range c.Ahead {
			sc.add(insertEventInto+`
				VALUES (?, ?, ?, ?, ?, ?, ?)`,
				c.RunID, t.Seq, turnOf(c), t.Kind, t.Round, t.DurationMS, nonNil(t.Payload))
		}
	}
	if c.Rewrite {
		// The transcript is append-only but for this: the model's message
		// whose calls an approval edited, and what follows it, are written
		// again, in the step that applies the decision.
		sc.add(`DELETE FROM run_messages WHERE run_id = ? AND idx >= ? AND @held = 1`, c.RunID, c.FirstMessage)
	}
	if e.Kind != "" {
		addMessages(&sc, c)
	} else {
		messages := make([][]any, len(c.Messages))
		for i, m := range c.Messages {
			messages[i] = []any{c.RunID, c.FirstMessage + i, turnOf(c), m}
		}
		sc.guardedRows("INSERT INTO run_messages (run_id, idx, turn, body)", held, messages)
	}
	if c.Executed != "" {
		sc.add(`UPDATE decisions SET executed_at = NOW(6)
			WHERE run_id = ? AND turn_digest = ? AND executed_at IS NULL AND @held = 1`,
			c.RunID, c.Executed)
	}
	if c.Outcome != "" {
		sc.add(`UPDATE decisions SET outcome = ? WHERE run_id = ? AND turn_digest = ? AND @held = 1`,
			c.Outcome, c.RunID, c.OutcomeDigest)
	}
	if d := c.Decision; d != nil {
		// A rule's decision, applied by this very step: executed now. A
		// second holder of the turn (which only a lost lease makes) clashes
		// on the unique key, and the script stops before its COMMIT.
		sc.add(`INSERT INTO decisions (run_id, turn_digest, kind, tools, scope, reason, decided_by, path, policy, executed_at)
			SELECT ?, ?, ?, ?, ?, ?, NULL, ?, ?, NOW(6) FROM DUAL WHERE @held = 1`,
			c.RunID, d.TurnDigest, d.Kind, d.Tools, d.Scope, []byte(d.Reason), d.Path, d.Policy)
	}
	addDeliveries(&sc, "@held = 1", c.Notifications)
	if changed {
		guard := "" // the event's INSERT stopped the script already
		if e.Kind == "" {
			guard = "@held = 1"
		}
		sc.change(guard, change)
	}
	sc.add("COMMIT")
	// Concurrent steps of many runs can deadlock on the status indexes
	// their UPDATEs rewrite; a step rolled back for it is tried again (its
	// guard still holds it to the holder), not taken for the end of the
	// continuation.
	res, err := sc.runContended(ctx, s.db)
	if isDuplicate(err) {
		// Only the holder appends; a clash means another holder did.
		return false, fmt.Errorf("store: append event %d of run %d: %w", e.Seq, c.RunID, runtime.ErrLeaseLost)
	}
	refused := isNullRefused(err)
	if err != nil && !refused {
		return false, fmt.Errorf("store: commit step of run %d: %w", c.RunID, err)
	}
	if !refused && res.affected(update) == 1 {
		return res.insertID(update) != 0, nil
	}
	// The guard said no: find out whether a cancel stopped a suspension or
	// the run is no longer ours.
	r, rerr := s.Run(ctx, c.RunID)
	if rerr != nil {
		return false, rerr
	}
	if r.Status == runtime.StatusRunning && r.ClaimedBy == c.ClaimedBy {
		if c.Status.Waiting() && r.CancelRequested {
			return true, fmt.Errorf("store: suspend run %d: %w", c.RunID, runtime.ErrCancelRequested)
		}
		if refused {
			// Still ours: the NULL was not the guard's.
			return false, fmt.Errorf("store: commit step of run %d: %w", c.RunID, err)
		}
	}
	return false, fmt.Errorf("store: commit step of run %d: %w", c.RunID, runtime.ErrLeaseLost)
}

// commitChange is the feed's change-log row of a step that pauses or
// settles its run; a step that keeps it running (or hands it back to the
// workers) changes nothing a card or a history row shows.
func commitChange(c runtime.Commit) (runChange, bool) {
	switch {
	case c.Status.Waiting():
		return runChange{runID: c.RunID, change: runtime.ChangeWaiting, status: c.Status}, true
	case c.Status.Terminal():
		return runChange{runID: c.RunID, change: runtime.ChangeSettled, status: c.Status}, true
	}
	return runChange{}, false
}

// addMessages appends a step's new transcript messages as one INSERT of
// plain rows, for a script in which the event's INSERT before it already
// stops everything when the guard did not hold.
func addMessages(sc *script, c runtime.Commit) {
	if len(c.Messages) == 0 {
		return
	}
	var q strings.Builder
	q.WriteString("INSERT INTO run_messages (run_id, idx, turn, body) VALUES ")
	args := make([]any, 0, 4*len(c.Messages))
	for i, m := range c.Messages {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?)")
		args = append(args, c.RunID, c.FirstMessage+i, turnOf(c), m)
	}
	sc.add(q.String(), args...)
}

// turnOf is the conversation's turn a step's rows are marked with; a
// commit that names none (a caller of before the turns) belongs to turn 1.
func turnOf(c runtime.Commit) int {
	return max(c.Turn, 1)
}

// nonNil keeps an empty payload an empty value rather than NULL, which
// the event's INSERT would take for its guard saying no.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
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
		// The deadline is on the database's clock, like every lease, and
		// counted from the very NOW(6) the run starts waiting.
		set = `status = ?, turn = turn + 1, turn_digest = ?, pending_tools = ?, claimed_by = NULL,
			lease_expires_at = NULL, pending_effect = NULL, waiting_since = NOW(6),
			decision_deadline = IF(? = 0, NULL, NOW(6) + INTERVAL ? MICROSECOND),
			approvals_required = IF(? > 1, ?, NULL)`
		args = []any{c.Status, c.TurnDigest, c.PendingTools, micros(c.DecisionTimeout), micros(c.DecisionTimeout),
			c.ApprovalsRequired, c.ApprovalsRequired}
	case c.Status == runtime.StatusDecided || c.Status == runtime.StatusQueued:
		// Handed back for a worker to finish (a draining server).
		set = `status = ?, claimed_by = NULL, lease_expires_at = NULL, pending_effect = NULL,
			decided_at = COALESCE(decided_at, NOW(6))`
		args = []any{c.Status}
	case c.Status.Terminal():
		set = `status = ?, claimed_by = NULL, lease_expires_at = NULL, pending_effect = NULL,
			decision_deadline = NULL, termination_reason = NULLIF(?, ''), answer = ?`
		args = []any{c.Status, c.TerminationReason, []byte(c.Answer)}
	default:
		// Every item of the SET costs the server a little at every step:
		// a step of a continuation that stamped no effect leaves
		// pending_effect alone, and one that did not change the
		// checkpoint leaves the counters, which the checkpoint holds too
		// (a tool step changes neither).
		set = `lease_expires_at = NOW(6) + INTERVAL ? MICROSECOND`
		args = []any{micros(c.Lease)}
		if c.PendingEffect != "" || c.Stamped {
			set += `, pending_effect = NULLIF(?, '')`
			args = append(args, c.PendingEffect)
		}
		if c.State == nil {
			return set + ", updated_at = NOW(6)", args
		}
	}
	if c.State != nil {
		set += ", state = ?"
		args = append(args, c.State)
	}
	set += ", iterations = ?, input_tokens = ?, output_tokens = ?, updated_at = NOW(6)"
	return set, append(args, c.Iterations, c.Usage.InputTokens, c.Usage.OutputTokens)
}
