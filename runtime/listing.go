package runtime

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Lists that page: the inbox and the approvals (waiting runs, oldest
// first) and the run history (newest first) are read a page at a time
// from a cursor, so that no run is out of reach however many there are.

// MaxPage bounds one page of any list.
const MaxPage = 500

// WaitingQuery asks for one page of the runs waiting for a decision.
type WaitingQuery struct {
	// OwnerID lists only that owner's runs; 0 lists everyone's.
	OwnerID     int64
	WithProcess bool // process runs too, not only interactive ones
	// ConfigurationID and Tool narrow the list: 0 and "" keep all.
	ConfigurationID int64
	Tool            string
	// After is where the page starts: after the run of this cursor.
	After *WaitingCursor
	Limit int
}

// WaitingCursor is a place in the waiting list, which is ordered by when
// a run began to wait, then by id.
type WaitingCursor struct {
	Since time.Time
	ID    int64
}

// String writes the cursor for a URL; ParseWaitingCursor reads it back.
func (c WaitingCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("w%d.%d", c.Since.UnixMicro(), c.ID)))
}

// errCursor is a cursor that this server did not write.
var errCursor = errors.New("runtime: not a cursor of this list")

// ParseWaitingCursor reads what WaitingCursor.String wrote; anything else
// is an invalid_request refusal.
func ParseWaitingCursor(s string) (*WaitingCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	body, ok := strings.CutPrefix(string(b), "w")
	micros, id, ok2 := strings.Cut(body, ".")
	m, err1 := strconv.ParseInt(micros, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err != nil || !ok || !ok2 || err1 != nil || err2 != nil || n < 1 {
		return nil, refuse(CodeInvalidRequest, "%v: use the next link of the page before", errCursor)
	}
	return &WaitingCursor{Since: time.UnixMicro(m).UTC(), ID: n}, nil
}

// PendingPage is one page of runs waiting for a decision.
type PendingPage struct {
	Runs []PendingRun
	// Total is how many runs wait that the query matches, on every page.
	Total int
	// Next is where the next page starts; nil on the last page.
	Next *WaitingCursor
}

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
	// Decision is the viewer's latest decision about the run, if any.
	Decision *ListedDecision
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
		l := ListedRun{Configuration: cfg, MayRead: actor.MayRead(row.OwnerID)}
		run := row.Run
		if l.MayRead {
			l.Run = e.readable(&run)
		} else {
			l.Run = &Run{ID: run.ID, ConfigurationID: run.ConfigurationID, Status: run.Status,
				TerminationReason: run.TerminationReason, CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt}
		}
		if row.DecisionKind != nil && row.DecidedAt != nil {
			l.Decision = &ListedDecision{Kind: *row.DecisionKind, DecidedAt: *row.DecidedAt}
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
