package runtime

import (
	"fmt"
	"strconv"
)

// Place names where one piece of run content is stored: its table and
// column, the run it belongs to, and which of the run's rows of that table
// holds it. A Sealer binds what it seals to its place, so that content
// copied into another row, column or run does not open there: someone who
// can write to the database but holds no key can neither read run content
// nor move one run's content (an edited call, a reason, a state) into
// another run.
type Place struct {
	Table, Column string
	RunID         int64
	// Row tells the run's rows of the table apart: a message's index, an
	// event's seq, a decision's turn digest, a notification's webhook id;
	// empty for the runs table, which has one row per run.
	Row string
}

// String names the place for logs and errors, e.g. "run_events.payload
// of run 42 (3)".
func (p Place) String() string {
	s := fmt.Sprintf("%s.%s of run %d", p.Table, p.Column, p.RunID)
	if p.Row != "" {
		s += " (" + p.Row + ")"
	}
	return s
}

// The places of run content, one constructor per table: every caller that
// seals or opens names its place through one of these, so that a value is
// opened where it was sealed and nowhere else.

// RunPlace is a column of a run's row: state, prompt or answer.
func RunPlace(column string, runID int64) Place {
	return Place{Table: "runs", Column: column, RunID: runID}
}

// MessagePlace is the transcript message at an index of a run.
func MessagePlace(runID int64, idx int) Place {
	return Place{Table: "run_messages", Column: "body", RunID: runID, Row: strconv.Itoa(idx)}
}

// PartialPlace is the answer a run's round is streaming (one a run).
func PartialPlace(runID int64) Place {
	return Place{Table: "run_partials", Column: "body", RunID: runID}
}

// EventPlace is the payload of a run's event.
func EventPlace(runID int64, seq int) Place {
	return Place{Table: "run_events", Column: "payload", RunID: runID, Row: strconv.Itoa(seq)}
}

// DecisionPlace is a column of the decision about a run's turn: reason,
// input, arguments or calls.
func DecisionPlace(column string, runID int64, digest string) Place {
	return Place{Table: "decisions", Column: column, RunID: runID, Row: digest}
}

// DeliveryPlace is the body of a run's notification.
func DeliveryPlace(runID int64, webhookID string) Place {
	return Place{Table: "webhook_deliveries", Column: "body", RunID: runID, Row: webhookID}
}
