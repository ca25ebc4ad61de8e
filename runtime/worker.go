package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// WorkerWindow is how recently a worker process must have been seen to
// count as alive: three of its heartbeats.
const WorkerWindow = 15 * time.Second

// Drain asks every continuation of this engine to hand its run back to the
// workers at its next step boundary (as decided, or queued when it never
// had a decision), so a server that stops loses nothing: a worker elsewhere
// finishes the run. It is how a graceful shutdown ends.
func (e *Engine) Drain() {
	e.drainOnce.Do(func() { close(e.draining) })
}

func (e *Engine) isDraining() bool {
	select {
	case <-e.draining:
		return true
	default:
		return false
	}
}

// Work runs n worker loops until ctx ends. Each loop claims the oldest
// decided run, else the oldest queued run, else a running run whose lease
// expired (its holder died), and executes it exactly as a request would;
// with nothing to do it waits poll. Work returns when every loop has
// stopped: call Drain first so that runs in flight are handed back.
func (e *Engine) Work(ctx context.Context, n int, poll time.Duration) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil && !e.isDraining() {
				c, err := e.claim(ctx)
				if err != nil && ctx.Err() == nil {
					e.log.Warn("worker claim failed", "err", err)
				}
				if c == nil {
					select {
					case <-ctx.Done():
					case <-e.draining:
					case <-time.After(poll):
					}
					continue
				}
				out := c.Run(ctx, nil)
				e.log.Info("worker finished a continuation", "run", out.RunID, "status", out.Status, "steps", out.Steps)
			}
		})
	}
	wg.Wait()
}

// workerClaimTries bounds how many decided runs a worker tries to claim
// in a row when others take them first, before it looks for other work.
const workerClaimTries = 3

// claim takes the next run a worker should execute, or nil: a decided
// run, else an expired pause (settled by its own claim), else a queued
// run, else a running run whose holder died.
func (e *Engine) claim(ctx context.Context) (*Continuation, error) {
	// A claim the database made is ours whether or not the caller still
	// waits: a shutdown that cancelled ctx between the claim and the
	// continuation would leave the run held by nobody until its lease
	// lapsed. The loop checks ctx before claiming; from there on the
	// continuation runs, and a draining engine hands the run straight back.
	ctx = context.WithoutCancel(ctx)
	holder := holderID()
	run, err := e.store.ClaimDecided(ctx, holder, e.lease)
	// Lost: another worker took that run first (on a cluster, one on
	// another node, whose lock this node never saw). The next one, then.
	for try := 1; errors.Is(err, ErrClaimLost) && try < workerClaimTries; try++ {
		run, err = e.store.ClaimDecided(ctx, holder, e.lease)
	}
	if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrClaimLost) {
		if err != nil {
			return nil, err
		}
		return e.resume(ctx, run)
	}
	if c, err := e.claimExpiredPause(ctx, holder); !errors.Is(err, ErrNotFound) {
		return c, err
	}
	for i, next := range []func(context.Context, string, time.Duration) (*Run, error){
		e.store.ClaimQueued, e.store.ClaimExpired,
	} {
		run, err := next(ctx, holder, e.lease)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrClaimLost) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if i == 1 {
			e.metrics.Recovered()
		}
		return e.resume(ctx, run)
	}
	return nil, nil
}

// leftAsItIs is the error of a worker that leaves a claimed run as it is
// because its content awaits an operator (see awaitsOperator).
func leftAsItIs(runID int64, err error) error {
	if errors.Is(err, ErrNotSealed) {
		return fmt.Errorf("runtime: run %d left as it is until turnstile state reseal seals its content: %w", runID, err)
	}
	return fmt.Errorf("runtime: run %d left for a process that holds its key: %w", runID, err)
}

// resume builds the continuation of a run a worker claimed. A decision
// recorded for the run's turn and not yet applied is applied first; a run
// whose state cannot be read settles as failed rather than being claimed
// again and again. A state sealed under a key this process lacks is not
// unreadable, only not this process's: the run is left as it is, its
// claim lapses with the lease, and a process that holds the key (or this
// one, once configured) recovers it. So is a run whose content is stored
// plain while keys are set, until state reseal seals it.
func (e *Engine) resume(ctx context.Context, run *Run) (*Continuation, error) {
	cfg, err := e.store.Configuration(ctx, run.ConfigurationID)
	if err != nil {
		return nil, err
	}
	state, err := e.decodeState(run.ID, run.State)
	if awaitsOperator(err) {
		return nil, leftAsItIs(run.ID, err)
	}
	if err != nil {
		c := e.continuation(run, cfg, State{}, nil)
		c.unreadable = true
		return c, nil
	}
	var d *DecisionRecord
	if run.TurnDigest != "" && state.Applied != run.TurnDigest {
		d, err = e.store.Decision(ctx, run.ID, run.TurnDigest)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		if d != nil {
			if err := e.openDecision(d); awaitsOperator(err) {
				return nil, leftAsItIs(run.ID, err)
			} else if err != nil {
				// The decision can never be carried out: settle, as for
				// a state that cannot be read.
				c := e.continuation(run, cfg, State{}, nil)
				c.unreadable = true
				return c, nil
			}
		}
	}
	c := e.continuation(run, cfg, state, d)
	c.durable = true
	// A cancel requested while no holder could notice it (the holder died,
	// or a draining server handed the run back) stops the run at its first
	// step boundary, before any tool runs.
	c.cancel = run.CancelRequested
	return c, nil
}
