package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

var _ runtime.EraseStore = (*Store)(nil)

// What erasing a run empties, a column a line. Empty is what a sealed
// column holds when there is nothing to seal (” or NULL), so no reader
// and no reseal takes an erased value for a corrupt sealed one (both skip
// empty values). Every table of migrations/ was looked at: standing
// approvals hold tool names, demo_refunds what a tool did to the world,
// sessions no run's content (flashes name runs by id), api_tokens and
// workers nothing of a run; they keep what they hold.
var (
	// erasedRunColumns are the content of the run's row: it stays, with
	// its ids, statuses, counts and times, as the audit.
	erasedRunColumns = []string{
		"prompt = ''",
		"answer = NULL",
		"state = ''", // the checkpoint: the transcript's head and the pending turn
		"pending_tools = NULL",
		"title = NULL", // cut from the prompt, or written from it
	}
	// erasedDecisionColumns are a decision's content: who decided what
	// (kind, scope, tools, path, outcome) and when stay.
	erasedDecisionColumns = []string{
		"reason = ''",
		"input = NULL",
		"arguments = NULL",
		"calls = NULL",
	}
	// erasedEventColumns are an event's content: its kind, round,
	// duration and time stay, the run's timeline without what was said.
	erasedEventColumns = []string{
		"payload = ''",
	}
	// erasedDeliveryColumns are a delivered notification's content: where
	// and when it went stays.
	erasedDeliveryColumns = []string{
		"body = ''",
	}
)

// eraseStatements are the statements that erase the rest of a run's
// content once its row is stamped, each with the run's id as its one
// argument.
var eraseStatements = []struct{ what, sql string }{
	// The transcript goes whole: a message is nothing but content.
	{"transcript", `DELETE FROM run_messages WHERE run_id = ?`},
	{"partial answer", `DELETE FROM run_partials WHERE run_id = ?`},
	{"event payloads", `UPDATE run_events SET ` + strings.Join(erasedEventColumns, ", ") + ` WHERE run_id = ?`},
	{"decisions", `UPDATE decisions SET ` + strings.Join(erasedDecisionColumns, ", ") + ` WHERE run_id = ?`},
	// A notification not yet delivered is never sent: its body is the
	// content being erased. One a worker is sending at this very moment
	// reaches its receiver, and its mark then finds no row.
	{"undelivered notifications", `DELETE FROM webhook_deliveries WHERE run_id = ? AND status <> 'delivered'`},
	{"delivered notifications", `UPDATE webhook_deliveries SET ` + strings.Join(erasedDeliveryColumns, ", ") +
		` WHERE run_id = ? AND status = 'delivered'`},
}

// EraseRun empties every copy of a settled run's content in one
// transaction and stamps its row with when and by whom (erased_at,
// erased_by); from then on every read of the run but History finds none.
// The UPDATE of the row is guarded by its status and erased_at, and locks
// it: a new turn (which moves the status off settled) waits for the commit
// and then finds the run erased, and a second erase finds it erased.
// runtime.ErrClaimLost, with nothing written, when the run is not settled
// or already erased (or does not exist: the caller read it just before).
func (s *Store) EraseRun(ctx context.Context, e runtime.Erasure) (time.Time, error) {
	fail := func(err error) (time.Time, error) {
		return time.Time{}, fmt.Errorf("store: erase run %d: %w", e.RunID, err)
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE runs SET `+strings.Join(erasedRunColumns, ", ")+`,
			erased_at = NOW(6), erased_by = ?, updated_at = NOW(6)
		WHERE id = ? AND erased_at IS NULL AND status IN ('completed', 'failed', 'cancelled')`, e.By, e.RunID)
	if err := oneRow(res, err, runtime.ErrClaimLost); err != nil {
		return fail(err)
	}
	for _, st := range eraseStatements {
		if _, err := tx.ExecContext(ctx, st.sql, e.RunID); err != nil {
			return fail(fmt.Errorf("%s: %w", st.what, err))
		}
	}
	var row struct {
		At     time.Time      `db:"erased_at"`
		Status runtime.Status `db:"status"`
	}
	if err := tx.GetContext(ctx, &row, `SELECT erased_at, status FROM runs WHERE id = ?`, e.RunID); err != nil {
		return fail(err)
	}
	if err := insertChanges(ctx, tx, runChange{runID: e.RunID, change: runtime.ChangeErased, status: row.Status}); err != nil {
		return fail(err)
	}
	at := row.At
	if err := tx.Commit(); err != nil {
		return fail(err)
	}
	return at, nil
}
