package runtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// What a decider reads: the inbox and the approvals, runs waiting for a
// decision oldest first. Like the run history (read_history.go, newest
// first), they are read a page at a time from a cursor, so that no run is
// out of reach however many there are.

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

// PendingRun is a run that waits for a decision, as the inbox shows it.
type PendingRun struct {
	Run           *Run
	Configuration *Configuration
	Turn          PendingTurn
	// Said is what the model wrote with the calls: run content, for those
	// who may read the run only.
	Said string
	// Parameters is the arguments schema of each call's tool, by tool
	// name, for the form that edits a call before approving it; a tool
	// only the configuration's tool source knows has none here (the
	// inbox asks no MCP server), and is edited as JSON.
	Parameters map[string]json.RawMessage
}

// maxInbox bounds the continuing runs the inbox lists.
const maxInbox = 200

// Pending lists one page of the runs the actor may decide, oldest first:
// every such run for admins and holders of the approve grant, their own for
// everyone else. The inbox asks for interactive runs only; the API
// (WithProcess) for the runs automated processes decide too. A run whose
// state cannot be read is left out (and logged): nobody could decide it.
// Refusals: invalid_request for a limit out of range.
func (e *Engine) Pending(ctx context.Context, actor Actor, q WaitingQuery) (PendingPage, error) {
	if q.Limit < 1 || q.Limit > MaxPage {
		return PendingPage{}, refuse(CodeInvalidRequest, "limit must be between 1 and %d", MaxPage)
	}
	q.OwnerID = actor.ID
	if actor.MayDecide(0) { // anyone's, not only their own
		q.OwnerID = 0
	}
	limit := q.Limit
	q.Limit++ // one more tells whether another page follows
	runs, total, err := e.store.WaitingPage(ctx, q)
	if err != nil {
		return PendingPage{}, err
	}
	page := PendingPage{Total: total}
	if len(runs) > limit {
		runs = runs[:limit]
		last := runs[limit-1]
		page.Next = &WaitingCursor{Since: *last.WaitingSince, ID: last.ID}
	}
	cfgs := configurations{e: e}
	for _, r := range runs {
		cfg, err := cfgs.of(ctx, r.ConfigurationID)
		if err != nil {
			return PendingPage{}, err
		}
		state, err := e.decodeState(r.ID, r.State)
		if err != nil || state.Pending == nil {
			e.log.Warn("waiting run with an unreadable state", "run", r.ID, "err", err)
			continue
		}
		page.Runs = append(page.Runs, PendingRun{Run: e.readable(r), Configuration: cfg, Turn: *state.Pending, Said: state.Said,
			Parameters: e.builtinParameters(cfg, state.Pending)})
	}
	return page, nil
}

// PendingOne returns one waiting run as a decider sees it, for its page
// (where notifications link). Refusals: not_found for anyone who may not
// decide it, as for a run that does not exist; not_waiting for a run that
// waits no more.
func (e *Engine) PendingOne(ctx context.Context, runID int64, actor Actor) (PendingRun, error) {
	run, cfg, err := e.store.RunForDecision(ctx, runID)
	if errors.Is(err, ErrNotFound) || (err == nil && !actor.MayDecide(run.OwnerID)) {
		return PendingRun{}, refuse(CodeNotFound, "no run %d", runID)
	}
	if err != nil {
		return PendingRun{}, err
	}
	if !run.Status.Waiting() || cfg == nil {
		return PendingRun{Run: e.readable(run), Configuration: cfg}, refuse(CodeNotWaiting, "run %d is %s", runID, run.Status)
	}
	state, err := e.decodeState(run.ID, run.State)
	if err != nil || state.Pending == nil {
		return PendingRun{}, refuse(CodeUnreadableState, "the suspended state of run %d cannot be read", runID)
	}
	return PendingRun{Run: e.readable(run), Configuration: cfg, Turn: *state.Pending, Said: state.Said,
		Parameters: e.builtinParameters(cfg, state.Pending)}, nil
}

// ContinuingRun is a run that continues in the background.
type ContinuingRun struct {
	Run           *Run
	Configuration *Configuration
}

// Continuing lists the runs a user owns or decided that continue in the
// background: decided and waiting for a worker, or running.
func (e *Engine) Continuing(ctx context.Context, actor Actor) ([]ContinuingRun, error) {
	runs, err := e.store.ContinuingRuns(ctx, actor.ID, maxInbox)
	if err != nil {
		return nil, err
	}
	out := make([]ContinuingRun, len(runs))
	cfgs := configurations{e: e}
	for i, r := range runs {
		cfg, err := cfgs.of(ctx, r.ConfigurationID)
		if err != nil {
			return nil, err
		}
		out[i] = ContinuingRun{Run: r, Configuration: cfg}
	}
	return out, nil
}
