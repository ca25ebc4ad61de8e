package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// MaxBulk is the most decisions one DecideMany takes.
const MaxBulk = 500

// Decided is what became of one request of a bulk: Err is its refusal
// (or a failure), else the decision was claimed and Continuation is the
// continuation to run in the request, nil on the durable path.
type Decided struct {
	RunID        int64
	Continuation *Continuation
	Err          error
	// Voted is set, with Err nil, for an approval recorded as a vote that
	// did not complete the count (see votes.go).
	Voted *Voted
}

// RunForDecision is a run with its configuration as a bulk reads it: Err
// is runtime.ErrNotFound for no such run; Configuration is nil when it is
// gone.
type RunForDecision struct {
	Run           *Run
	Configuration *Configuration
	Err           error
}

// BulkStore is what DecideMany needs of the store: the reads and the
// claims of many runs in few round trips.
type BulkStore interface {
	// RunsForDecision reads the runs and their configurations, keyed by
	// run id; a missing run is there with ErrNotFound.
	RunsForDecision(ctx context.Context, ids []int64) (map[int64]RunForDecision, error)
	// ClaimMany claims each run as Claim does, guarded by its own status
	// and digest, and returns one error per claim in order: nil when it
	// won, ErrClaimLost when someone else did.
	ClaimMany(ctx context.Context, claims []Claim) []error
}

// PathChooser picks the paths of the claims a bulk is about to make, once
// the checks that write nothing passed: n is how many runs passed them,
// and paths has one path for each, in order. Its error refuses those n
// runs with it, and nothing is claimed.
type PathChooser func(n int) (paths []string, err error)

// DecideMany runs the decision pipeline for each request on its own, as
// Decide does, and returns one Decided per request, in order: a refusal
// of one (Err a *Refusal, nothing written for it) never stops the others.
// Each request names its own Path, unless choose is given: then choose
// names them, once it is known which runs are to be claimed, so that a
// caller who runs continuations in a bounded number of slots takes a slot
// for each run it claims rather than one for each it was asked about. The
// runs and their configurations are read at once and the claims made in
// batches; a lost claim is classified exactly as Decide's is, and so,
// without a claim, is the request of a run whose turn digest as read is
// not the one sent (stale_turn, mostly). Requests must name distinct runs:
// a second request for a run is refused with invalid_request, as is one
// that edits arguments (a bulk edits no call: it would approve the call
// unedited). An approval of a turn that needs several approvals is a vote
// (see bulkVote): Voted when it did not complete the count.
func (e *Engine) DecideMany(ctx context.Context, reqs []DecideRequest, choose PathChooser) []Decided {
	out := make([]Decided, len(reqs))
	pipes := make([]pipeline, len(reqs))
	ids := make([]int64, 0, len(reqs))
	seen := make(map[int64]bool, len(reqs))
	for i := range reqs {
		out[i].RunID = reqs[i].RunID
		if seen[reqs[i].RunID] {
			out[i].Err = refuse(CodeInvalidRequest, "run %d is named twice", reqs[i].RunID)
			continue
		}
		seen[reqs[i].RunID] = true
		if err := validDecision(&reqs[i]); err != nil {
			out[i].Err = err
			continue
		}
		if len(reqs[i].Arguments) > 0 || hasEdits(reqs[i].Form) {
			out[i].Err = refuse(CodeInvalidRequest, "a bulk decision edits no call: edit run %d's calls in a decision of its own", reqs[i].RunID)
			continue
		}
		pipes[i] = approvalPipeline(e, reqs[i])
		ids = append(ids, reqs[i].RunID)
	}
	read, err := e.readForDecision(ctx, ids)
	if err != nil {
		for i := range out {
			if out[i].Err == nil {
				out[i].Err = err
			}
		}
		return out
	}

	// The checks that write nothing, each run on its own; then the paths
	// of those that passed, and one batch of claims for them.
	var passed []int
	for i, req := range reqs {
		if out[i].Err != nil {
			continue
		}
		p := &pipes[i]
		r, ok := read[req.RunID]
		if !ok {
			r.Err = ErrNotFound
		}
		if err := p.checkRun(ctx, r.Run, r.Configuration, r.Err); err != nil {
			out[i].Err = err
			continue
		}
		if err := p.checkApproval(); err != nil {
			out[i].Err = err
			continue
		}
		if r.Run.TurnDigest != req.Digest {
			// Its claim, guarded by the digest, could only be lost: it is
			// classified as a lost claim is, without one, so that it
			// takes no path (and no slot of the caller's) at all.
			out[i].Err = p.claimFailed(ctx, ErrClaimLost)
			continue
		}
		passed = append(passed, i)
	}
	if len(passed) == 0 {
		return out
	}
	if choose != nil {
		paths, err := choose(len(passed))
		if err == nil && len(paths) != len(passed) {
			err = fmt.Errorf("runtime: bulk decision: %d paths for %d claims", len(paths), len(passed))
		}
		if err != nil {
			for _, i := range passed {
				out[i].Err = err
			}
			return out
		}
		for k, i := range passed {
			pipes[i].path = paths[k]
		}
	}
	var claims []Claim
	var decisions []DecisionRecord
	var at []int     // the request of each claim
	var voting []int // the requests that are votes
	for _, i := range passed {
		req, p := reqs[i], &pipes[i]
		if p.needsVotes() {
			voting = append(voting, i)
			continue
		}
		d := DecisionRecord{Kind: req.Decision, Scope: req.Scope, Reason: req.Reason}
		standing, err := p.standing(d)
		if err != nil {
			out[i].Err = err
			continue
		}
		c, d, err := p.prepare(d, standing)
		if err != nil {
			out[i].Err = err
			continue
		}
		claims, decisions, at = append(claims, c), append(decisions, d), append(at, i)
	}
	bulkVotes(ctx, reqs, pipes, voting, out)
	if len(claims) == 0 {
		return out
	}
	for k, err := range e.store.ClaimMany(ctx, claims) {
		i := at[k]
		if err != nil {
			out[i].Err = pipes[i].claimFailed(ctx, err)
			continue
		}
		out[i].Continuation = pipes[i].won(claims[k], decisions[k])
	}
	return out
}

// bulkVoteLanes bounds how many of a bulk's votes are made at once.
const bulkVoteLanes = 32

// bulkVotes makes a bulk's votes (the requests at voting), before its
// batch of claims, many at once: they meet in the store's vote queue,
// which makes the votes that arrive together in one transaction.
func bulkVotes(ctx context.Context, reqs []DecideRequest, pipes []pipeline, voting []int, out []Decided) {
	lanes := make(chan struct{}, bulkVoteLanes)
	var wg sync.WaitGroup
	for _, i := range voting {
		lanes <- struct{}{}
		wg.Go(func() {
			defer func() { <-lanes }()
			out[i].Continuation, out[i].Voted, out[i].Err = pipes[i].bulkVote(ctx, reqs[i])
		})
	}
	wg.Wait()
}

// bulkVote is a bulk's approval of a turn that needs votes: a vote of
// its own, on the path chosen for it. A vote that claims nothing leaves its path unused (a caller's
// slot goes back, as a refused run's does).
func (p *pipeline) bulkVote(ctx context.Context, req DecideRequest) (*Continuation, *Voted, error) {
	d := DecisionRecord{Kind: req.Decision, Scope: req.Scope, Reason: req.Reason}
	if err := p.checkVote(d, false); err != nil {
		return nil, nil, err
	}
	c, err := p.vote(ctx, d)
	var v *Voted
	if errors.As(err, &v) {
		return nil, v, nil
	}
	return c, nil, err
}

// readForDecision reads the runs of a bulk and their configurations at
// once.
func (e *Engine) readForDecision(ctx context.Context, ids []int64) (map[int64]RunForDecision, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	read, err := e.store.RunsForDecision(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("runtime: read %d runs for a bulk decision: %w", len(ids), err)
	}
	return read, nil
}
