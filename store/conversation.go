package store

import (
	"context"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
)

// StartTurn starts a settled run's next turn in one transaction and one
// round trip. The UPDATE is the guard: it moves the run only while it is
// settled at the turn the message was read at, so of many messages sent
// at once exactly one starts a turn (and none an erased run's); the turn_started event's INSERT
// carries a NULL run_id when it did not hold, and MySQL runs nothing of
// the script after it. The last turn's answer and reason are cleared: the
// run is not settled any more.
func (s *Store) StartTurn(ctx context.Context, t runtime.NextTurn) error {
	var sc script
	sc.add("START TRANSACTION")
	update := sc.add(`UPDATE runs SET status = ?, conversation_turn = conversation_turn + 1, configuration_id = ?,
			state = ?, claimed_by = NULLIF(?, ''),
			lease_expires_at = IF(? = '', NULL, NOW(6) + INTERVAL ? MICROSECOND),
			answer = NULL, termination_reason = NULL, pending_effect = NULL, turn_digest = NULL,
			pending_tools = NULL, waiting_since = NULL, decided_at = NULL, decision_deadline = NULL,
			cancel_requested = 0, updated_at = NOW(6)
		WHERE id = ? AND status IN ('completed', 'failed', 'cancelled') AND conversation_turn = ? AND erased_at IS NULL`,
		t.Status, t.ConfigurationID, t.State, t.ClaimedBy, t.ClaimedBy, micros(t.Lease), t.RunID, t.From)
	e := t.Event
	sc.add(insertEventInto+`
		VALUES (IF(ROW_COUNT() = 1, ?, NULL), ?, ?, ?, ?, ?, ?)`,
		t.RunID, e.Seq, t.From+1, e.Kind, e.Round, e.DurationMS, nonNil(e.Payload))
	addMessages(&sc, runtime.Commit{RunID: t.RunID, Messages: t.Messages, FirstMessage: t.FirstMessage, Turn: t.From + 1})
	sc.change("", runChange{runID: t.RunID, change: runtime.ChangeStarted, status: t.Status})
	addMint(&sc, "", t.RunID, t.ClaimedBy, t.Credential)
	sc.add("COMMIT")
	res, err := sc.runContended(ctx, s.db)
	if isNullRefused(err) || isDuplicate(err) || (err == nil && res.affected(update) != 1) {
		return fmt.Errorf("store: start turn %d of run %d: %w", t.From+1, t.RunID, runtime.ErrClaimLost)
	}
	if err != nil {
		return fmt.Errorf("store: start turn %d of run %d: %w", t.From+1, t.RunID, err)
	}
	return nil
}
