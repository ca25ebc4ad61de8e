package store

import (
	"context"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Decision returns the decision recorded for a turn, or runtime.ErrNotFound.
func (s *Store) Decision(ctx context.Context, runID int64, digest string) (*runtime.DecisionRecord, error) {
	var d runtime.DecisionRecord
	err := s.db.GetContext(ctx, &d, `
		SELECT `+decisionColumns+`
		FROM decisions d LEFT JOIN users u ON u.id = d.decided_by
		WHERE d.run_id = ? AND d.turn_digest = ?`, runID, digest)
	if err != nil {
		return nil, notFound(fmt.Sprintf("decision of run %d", runID), err)
	}
	return &d, nil
}

// decisionColumns selects a decision of the table aliased d, its decider's
// name from u: a person's name, or "policy:<name>" for a rule's decision,
// which has no decided_by.
const decisionColumns = `d.run_id, d.turn_digest, d.kind, d.tools, d.scope, d.reason, COALESCE(d.input, '') AS input,
	COALESCE(d.arguments, '') AS arguments, COALESCE(d.calls, '') AS calls,
	COALESCE(d.decided_by, 0) AS decided_by, ` + deciderName + ` AS decider_name, d.decided_at, d.path,
	COALESCE(d.outcome, '') AS outcome, COALESCE(d.policy, '') AS policy`

// deciderName is the name of the decider of the decision aliased d, its
// user aliased u, as every read shows it.
const deciderName = `COALESCE(u.name, CONCAT('` + runtime.PolicyPrefix + `', d.policy), '')`

// LatestDecisionBy returns a user's latest decision about a run, or
// runtime.ErrNotFound when they made none.
func (s *Store) LatestDecisionBy(ctx context.Context, runID, userID int64) (*runtime.DecisionRecord, error) {
	var d runtime.DecisionRecord
	err := s.db.GetContext(ctx, &d, `
		SELECT `+decisionColumns+`
		FROM decisions d LEFT JOIN users u ON u.id = d.decided_by
		WHERE d.run_id = ? AND d.decided_by = ? ORDER BY d.decided_at DESC, d.id DESC LIMIT 1`, runID, userID)
	if err != nil {
		return nil, notFound(fmt.Sprintf("decision of run %d by user %d", runID, userID), err)
	}
	return &d, nil
}
