package runtime

import (
	"context"
	"encoding/json"
	"errors"
)

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

// RunDetail is everything a run's detail page shows.
type RunDetail struct {
	Run           *Run
	Configuration *Configuration
	Events        []Event
}

// Visible returns a run and its configuration for its owner and admins
// only: anyone else gets not_found, so a run's existence is not revealed.
func (e *Engine) Visible(ctx context.Context, runID int64, actor Actor) (*Run, *Configuration, error) {
	run, err := e.store.Run(ctx, runID)
	if errors.Is(err, ErrNotFound) || (err == nil && !actor.MayRead(run.OwnerID)) {
		return nil, nil, refuse(CodeNotFound, "no run %d", runID)
	}
	if err != nil {
		return nil, nil, err
	}
	cfg, err := e.store.Configuration(ctx, run.ConfigurationID)
	if err != nil {
		return nil, nil, err
	}
	return e.readable(run), cfg, nil
}

// Detail returns a visible run (see Visible) with its stored events.
func (e *Engine) Detail(ctx context.Context, runID int64, actor Actor) (*RunDetail, error) {
	run, cfg, err := e.Visible(ctx, runID, actor)
	if err != nil {
		return nil, err
	}
	events, err := e.Events(ctx, runID, 0)
	if err != nil {
		return nil, err
	}
	return &RunDetail{Run: run, Configuration: cfg, Events: events}, nil
}

// Turn returns the turn a run waits on. Refusals: not_found for a run that
// does not exist, not_waiting for one that waits on no turn, and
// unreadable_state when its suspended state cannot be read. It checks no
// permission: a surface uses it only to show again a form the pipeline
// refused to this very actor.
func (e *Engine) Turn(ctx context.Context, runID int64) (*PendingTurn, error) {
	run, err := e.store.Run(ctx, runID)
	if errors.Is(err, ErrNotFound) {
		return nil, refuse(CodeNotFound, "no run %d", runID)
	}
	if err != nil {
		return nil, err
	}
	if !run.Status.Waiting() {
		return nil, refuse(CodeNotWaiting, "run %d is %s: it waits on no turn", runID, run.Status)
	}
	state, err := e.decodeState(run.ID, run.State)
	if err != nil || state.Pending == nil {
		return nil, refuse(CodeUnreadableState, "the suspended state of run %d cannot be read", runID)
	}
	return state.Pending, nil
}

// DecidedRun is a run as someone who decided a turn of it sees it
// afterwards: only how it stands and how it ended, and their decision.
type DecidedRun struct {
	Run           *Run
	Configuration *Configuration
	Decision      DecisionRecord
}

// DecidedBy returns a run with the actor's latest decision about it, for
// the page their decision lands on. Refusals: not_found when they decided
// no turn of it, as for a run that does not exist.
func (e *Engine) DecidedBy(ctx context.Context, runID int64, actor Actor) (DecidedRun, error) {
	d, err := e.store.LatestDecisionBy(ctx, runID, actor.ID)
	if errors.Is(err, ErrNotFound) {
		return DecidedRun{}, refuse(CodeNotFound, "no run %d", runID)
	}
	if err != nil {
		return DecidedRun{}, err
	}
	run, err := e.store.Run(ctx, runID)
	if err != nil {
		return DecidedRun{}, err
	}
	cfg, err := e.store.Configuration(ctx, run.ConfigurationID)
	if err != nil {
		return DecidedRun{}, err
	}
	// Only what a decider may see of a run they may not read.
	shown := &Run{ID: run.ID, ConfigurationID: run.ConfigurationID, Status: run.Status,
		TerminationReason: run.TerminationReason, CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt}
	if err := e.openDecision(d); err != nil {
		d.Reason, d.Input, d.Arguments = unreadable(err), nil, nil
	}
	return DecidedRun{Run: shown, Configuration: cfg, Decision: *d}, nil
}
