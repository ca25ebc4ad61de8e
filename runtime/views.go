package runtime

import (
	"context"
	"errors"
)

// PendingRun is a run that waits for a decision, as the inbox shows it.
type PendingRun struct {
	Run           *Run
	Configuration *Configuration
	Turn          PendingTurn
}

// maxInbox bounds one inbox listing.
const maxInbox = 200

// Pending lists the runs the actor may decide, oldest first: every such
// run for admins and holders of the approve grant, their own for everyone
// else. The inbox asks for interactive runs only; the API (withProcess)
// for the runs automated processes decide too. A run whose state cannot be
// read is left out (and logged): nobody could decide it.
func (e *Engine) Pending(ctx context.Context, actor Actor, withProcess bool) ([]PendingRun, error) {
	owner := actor.ID
	if actor.MayDecide(0) { // anyone's, not only their own
		owner = 0
	}
	runs, err := e.store.WaitingRuns(ctx, owner, withProcess, maxInbox)
	if err != nil {
		return nil, err
	}
	cfgs := map[int64]*Configuration{}
	out := make([]PendingRun, 0, len(runs))
	for _, r := range runs {
		cfg, ok := cfgs[r.ConfigurationID]
		if !ok {
			if cfg, err = e.store.Configuration(ctx, r.ConfigurationID); err != nil {
				return nil, err
			}
			cfgs[r.ConfigurationID] = cfg
		}
		state, err := e.decodeState(r.State)
		if err != nil || state.Pending == nil {
			e.log.Warn("waiting run with an unreadable state", "run", r.ID, "err", err)
			continue
		}
		out = append(out, PendingRun{Run: r, Configuration: cfg, Turn: *state.Pending})
	}
	return out, nil
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
	cfgs := map[int64]*Configuration{}
	for i, r := range runs {
		cfg, ok := cfgs[r.ConfigurationID]
		if !ok {
			if cfg, err = e.store.Configuration(ctx, r.ConfigurationID); err != nil {
				return nil, err
			}
			cfgs[r.ConfigurationID] = cfg
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

// Turn returns the turn a run waits on, or nil when it waits on none (or
// its state cannot be read: the decision pipeline refuses that on its own).
// It checks no permission: surfaces use it only to read a submitted input
// form by its schema before the pipeline decides.
func (e *Engine) Turn(ctx context.Context, runID int64) (*PendingTurn, error) {
	run, err := e.store.Run(ctx, runID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	state, err := e.decodeState(run.State)
	if err != nil || !run.Status.Waiting() {
		return nil, nil
	}
	return state.Pending, nil
}
