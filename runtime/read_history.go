package runtime

import (
	"context"
	"time"
)

// RunQuery asks for one page of the run history, newest first.
type RunQuery struct {
	// Status, ConfigurationID and OwnerID narrow the list (zero keeps
	// all; OwnerID is for admins, who see everyone's runs).
	Status          Status
	ConfigurationID int64
	OwnerID         int64
	// DecidedByMe keeps only the runs the viewer decided a turn of.
	DecidedByMe bool
	// Before is where the page starts: runs with a smaller id.
	Before int64
	Limit  int
}

// HistoryQuery is a RunQuery as the store runs it: for a viewer, who sees
// their own runs and the runs they decided, or, as an admin, all.
type HistoryQuery struct {
	RunQuery
	ViewerID int64
	All      bool
}

// ListedRun is a run as the history lists it to a viewer. A viewer who may
// only have decided it sees its id, configuration, status, times and their
// own decision: Run then carries nothing else.
type ListedRun struct {
	Run           *Run
	Configuration *Configuration
	// MayRead: the viewer owns the run or is an admin.
	MayRead bool
	// Erased: the run's content was erased (see Engine.Erase). Run then
	// carries its id, configuration, owner (for who may read it), status,
	// times and ErasedAt, and no page of it exists.
	Erased bool
	// Decision is the viewer's latest decision about the run, if any.
	Decision *ListedDecision
	// Rule is the latest decision a rule of the policy made about the
	// run, if any, for a viewer who may read the run.
	Rule *ListedRule
}

// ListedRule is a rule's decision in a list: approve or deny, by which
// rule, and its reason.
type ListedRule struct {
	Kind, Policy, Reason string
}

// ListedDecision is what a decider sees of their own decision in a list.
type ListedDecision struct {
	Kind      string    `db:"kind"`
	DecidedAt time.Time `db:"decided_at"`
}

// HistoryRow is one row of the run history as the store reads it.
type HistoryRow struct {
	Run
	DecisionKind *string    `db:"my_kind"`
	DecidedAt    *time.Time `db:"my_decided_at"`
	RuleKind     *string    `db:"rule_kind"`
	RulePolicy   *string    `db:"rule_policy"`
	RuleReason   *string    `db:"rule_reason"`
	RuleDigest   *string    `db:"rule_digest"`
}

// RunPage is one page of the run history.
type RunPage struct {
	Runs []ListedRun
	// Next is the Before of the next page; 0 on the last page.
	Next int64
}

// History lists the runs the actor may see, newest first: their own, the
// ones they decided (as ListedRun says), and every run for admins.
// Refusals: invalid_request for a limit out of range.
func (e *Engine) History(ctx context.Context, actor Actor, q RunQuery) (RunPage, error) {
	if q.Limit < 1 || q.Limit > MaxPage {
		return RunPage{}, refuse(CodeInvalidRequest, "limit must be between 1 and %d", MaxPage)
	}
	all := actor.Role == RoleAdmin
	if !all {
		q.OwnerID = 0
	}
	rows, err := e.store.History(ctx, HistoryQuery{RunQuery: q, ViewerID: actor.ID, All: all}, q.Limit+1)
	if err != nil {
		return RunPage{}, err
	}
	var page RunPage
	if len(rows) > q.Limit {
		rows = rows[:q.Limit]
		page.Next = rows[len(rows)-1].ID
	}
	cfgs := configurations{e: e}
	for _, row := range rows {
		cfg, err := cfgs.of(ctx, row.ConfigurationID)
		if err != nil {
			return RunPage{}, err
		}
		l := ListedRun{Configuration: cfg, MayRead: actor.MayRead(row.OwnerID), Erased: row.ErasedAt != nil}
		run := row.Run
		if l.Erased {
			// Nothing of its content is left to show, nor a page to open:
			// only that it was, and when it was erased.
			l.Run = &Run{ID: run.ID, ConfigurationID: run.ConfigurationID, OwnerID: run.OwnerID, OwnerName: run.OwnerName,
				Status: run.Status, CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt, ErasedAt: run.ErasedAt}
			if !l.MayRead {
				l.Run.OwnerID, l.Run.OwnerName = 0, ""
			}
		} else if l.MayRead {
			l.Run = e.readable(&run)
		} else {
			l.Run = &Run{ID: run.ID, ConfigurationID: run.ConfigurationID, Status: run.Status,
				TerminationReason: run.TerminationReason, CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt}
		}
		if row.DecisionKind != nil && row.DecidedAt != nil {
			l.Decision = &ListedDecision{Kind: *row.DecisionKind, DecidedAt: *row.DecidedAt}
		}
		if row.RulePolicy != nil && row.RuleKind != nil && l.MayRead && !l.Erased {
			l.Rule = &ListedRule{Kind: *row.RuleKind, Policy: *row.RulePolicy}
			if row.RuleReason != nil && row.RuleDigest != nil {
				// Sealed like every decision's reason.
				reason, err := e.openText(*row.RuleReason, DecisionPlace("reason", run.ID, *row.RuleDigest))
				if err != nil {
					reason = unreadable(err)
				}
				l.Rule.Reason = reason
			}
		}
		page.Runs = append(page.Runs, l)
	}
	return page, nil
}

// configurations reads each configuration of a list once.
type configurations struct {
	e    *Engine
	byID map[int64]*Configuration
}

func (c *configurations) of(ctx context.Context, id int64) (*Configuration, error) {
	if cfg, ok := c.byID[id]; ok {
		return cfg, nil
	}
	cfg, err := c.e.store.Configuration(ctx, id)
	if err != nil {
		return nil, err
	}
	if c.byID == nil {
		c.byID = map[int64]*Configuration{}
	}
	c.byID[id] = cfg
	return cfg, nil
}
