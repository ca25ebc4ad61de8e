package runtime

import (
	"context"
	"errors"
)

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
	if errors.Is(err, ErrNotFound) {
		// Erased since: its decisions stay, but the run is gone.
		return DecidedRun{}, refuse(CodeNotFound, "no run %d", runID)
	}
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
