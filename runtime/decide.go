package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxReasonRunes bounds a decision's reason.
const maxReasonRunes = 2000

// DecideRequest is a person's approval or denial of a pending turn.
type DecideRequest struct {
	RunID    int64
	Digest   string // the turn digest the decider saw
	Decision string // DecisionApprove or DecisionDeny
	Scope    string // ScopeOnce (default) or ScopeSession
	Reason   string
	Actor    Actor
	// Path is PathRequest (the caller runs the continuation) or PathDurable
	// (a worker does).
	Path string
	// Inbox marks a decision made in the inbox, which refuses process runs.
	Inbox bool
	// Arguments replace, by call id, the arguments of pending calls: an
	// approval of the turn with the calls edited (see decide_edit.go). Only with
	// DecisionApprove.
	Arguments map[string]json.RawMessage
	// Form is the decision's form as a page posted it, values by field
	// name. When it holds an edit form's fields (see decide_edit.go) they are
	// read against the pending turn in place of Arguments, at the step
	// that checks the edits; its other fields are ignored.
	Form map[string][]string
	// Calls decide the turn call by call, by call id, naming every pending
	// call (see decide_calls.go). Decision may then be left out; given, it
	// must be what the calls make.
	Calls map[string]CallDecision
	// Rest lets Calls leave pending calls out: they take Rest, approve or
	// deny (the inbox card's "Approve the rest" and "Deny the rest").
	Rest string
}

// Decide runs the decision pipeline for an approval or a denial: the checks
// that write nothing (whether the actor may decide the run at all, then
// its status, origin, configuration, four-eyes, state and grants, then an
// approval's edited arguments: invalid_input naming each bad field), then
// the atomic claim. It
// returns a *Refusal when it will not decide, with nothing written. On the
// request path the returned continuation must be run by the caller; on the
// durable path it is nil and a worker carries the decision out. An approval
// of a turn that needs several is a vote (votes.go): one that does not
// complete the count returns a *Voted, and the turn still waits.
func (e *Engine) Decide(ctx context.Context, req DecideRequest) (*Continuation, error) {
	if err := validDecision(&req); err != nil {
		return nil, err
	}
	p := approvalPipeline(e, req)
	if err := p.check(ctx); err != nil {
		return nil, err
	}
	if err := p.checkCalls(&req); err != nil {
		return nil, err
	}
	if err := p.checkApproval(); err != nil {
		return nil, err
	}
	d := DecisionRecord{Kind: req.Decision, Scope: req.Scope, Reason: req.Reason}
	if p.needsVotes() {
		if err := p.checkVote(d, len(req.Arguments) > 0 || hasEdits(req.Form) || len(callEdits(req.Calls)) > 0); err != nil {
			return nil, err
		}
		return p.vote(ctx, d)
	}
	if p.approve {
		edits, formErrors := req.Arguments, map[string]string(nil)
		if hasEdits(req.Form) {
			edits, formErrors = p.e.readEditForm(p.state.Pending, req.Form)
		}
		if req.Calls != nil {
			edits = callEdits(req.Calls)
		}
		var err error
		if d.Arguments, err = p.checkEdits(ctx, edits, formErrors); err != nil {
			if req.Calls != nil {
				err = p.callEditFields(err)
			}
			return nil, err
		}
	}
	if err := p.recordCalls(&d); err != nil {
		return nil, err
	}
	standing, err := p.standing(d)
	if err != nil {
		return nil, err
	}
	return p.claim(ctx, d, standing)
}

// validDecision refuses a decision that is malformed whatever the run
// (its kind, scope or reason), and fills in the default scope.
func validDecision(req *DecideRequest) error {
	switch {
	case req.Calls != nil && req.Decision != "" && req.Decision != DecisionApprove && req.Decision != DecisionDeny &&
		req.Decision != DecisionMixed:
		return refuse(CodeInvalidRequest, "decision must be approve or deny, or left out with calls")
	case req.Calls != nil:
		if err := validCalls(req); err != nil {
			return err
		}
	case req.Decision != DecisionApprove && req.Decision != DecisionDeny:
		return refuse(CodeInvalidRequest, "decision must be approve or deny")
	}
	if req.Scope == "" {
		req.Scope = ScopeOnce
	}
	if req.Scope != ScopeOnce && req.Scope != ScopeSession {
		return refuse(CodeInvalidRequest, "scope must be once or session")
	}
	if utf8.RuneCountInString(req.Reason) > maxReasonRunes || !utf8.ValidString(req.Reason) {
		return refuse(CodeInvalidRequest, "the reason must be valid text of at most %d characters", maxReasonRunes)
	}
	if req.Decision != DecisionApprove && req.Calls == nil && (len(req.Arguments) > 0 || hasEdits(req.Form)) {
		return refuse(CodeInvalidRequest, "arguments come only with an approval: an edited call is approved as edited")
	}
	return nil
}

// approvalPipeline is the pipeline of an approval or a denial.
func approvalPipeline(e *Engine, req DecideRequest) pipeline {
	return pipeline{e: e, runID: req.RunID, digest: req.Digest, actor: req.Actor, path: req.Path,
		inbox: req.Inbox, waitFor: StatusWaitingForApproval,
		// A turn decided call by call approves when any call is approved:
		// four-eyes and the grants then ask about the approved calls.
		approve: req.Decision == DecisionApprove || req.Decision == DecisionMixed}
}

// checkApproval is the check an approval adds after check: the grants.
func (p *pipeline) checkApproval() error {
	if p.approve {
		return p.checkGrants()
	}
	return nil
}

// pipeline carries one decision through its checks and its claim.
type pipeline struct {
	e       *Engine
	runID   int64
	digest  string
	actor   Actor
	path    string
	inbox   bool
	waitFor Status
	approve bool
	// choices are a turn decided call by call, by call id; nil for a
	// decision of the whole turn (see decide_calls.go).
	choices map[string]callChoice

	run   *Run
	cfg   *Configuration
	state State
	// tools are the turn's tools by name, found when an edit had to be
	// checked against them (checkEdits); nil without an edit.
	tools map[string]Tool
}

// check runs the checks that write nothing, in order: each later check
// may only refuse someone the earlier ones let through.
func (p *pipeline) check(ctx context.Context) error {
	run, cfg, err := p.e.store.RunForDecision(ctx, p.runID)
	return p.checkRun(ctx, run, cfg, err)
}

// checkRun is check on a run and configuration already read (err is the
// read's), so that a bulk reads all of its runs at once.
func (p *pipeline) checkRun(ctx context.Context, run *Run, cfg *Configuration, err error) error {
	if errors.Is(err, ErrNotFound) {
		return refuse(CodeNotFound, "no run %d", p.runID)
	}
	if err != nil {
		return err
	}
	p.run = run
	// Who may not decide a run may not read it either: they get the very
	// answer a missing run gets, whatever its state, before anything is
	// compared with what they sent. Otherwise the status, and the lost
	// claim's digest lookup, would tell a stranger what became of it.
	if !p.actor.MayDecide(run.OwnerID) {
		return refuse(CodeNotFound, "no run %d", p.runID)
	}
	if run.Status != p.waitFor {
		return p.notWaiting(ctx, run)
	}
	if run.OwnerDeleted {
		// Deleting a user cancels their runs in the same transaction; a
		// run that escaped it still never continues as someone who does
		// not exist.
		return refuse(CodeNotWaiting, "run %d no longer waits: its owner was deleted", run.ID)
	}
	if p.inbox && run.Origin == OriginProcess {
		return refuse(CodeProcessRun, "run %d is decided by the process that started it", run.ID)
	}
	if cfg == nil || !cfg.Active {
		return refuse(CodeInactiveConfiguration, "the configuration of run %d is not active", run.ID)
	}
	p.cfg = cfg
	if p.approve && cfg.RequireSecondApprover && p.actor.ID == run.OwnerID {
		return refuse(CodeFourEyes, "someone else has to approve run %d; you may deny it", run.ID)
	}
	state, err := p.e.decodeState(run.ID, run.State)
	if errors.Is(err, ErrKeyMissing) {
		return refuse(CodeUnreadableState, "run %d is sealed under a key this server does not hold; it can be decided where that key is configured", run.ID)
	}
	if errors.Is(err, ErrNotSealed) {
		return refuse(CodeUnreadableState, "the suspended state of run %d is stored unsealed; it can be decided once turnstile state reseal has sealed it", run.ID)
	}
	if err != nil || state.Pending == nil {
		return refuse(CodeUnreadableState, "the suspended state of run %d cannot be read", run.ID)
	}
	p.state = state
	// An escalated turn is for the escalation grant's holders alone: the
	// owner and the approvers who let it expire may no longer decide it.
	// Strangers never get this far (not_found above).
	if g := state.Pending.Escalated; g != "" && !p.actor.Has(g) {
		return refuse(CodeApproverNotPermitted, "nobody decided it in time, and it was escalated: only holders of the %q grant may decide it now", g)
	}
	return nil
}

// checkGrants: approving a write turn takes every grant its tools name;
// of a turn decided call by call, the approved calls' tools.
func (p *pipeline) checkGrants() error {
	for _, c := range p.state.Pending.Calls {
		if !p.approves(c.ID) {
			continue
		}
		if g := p.cfg.Grant(c.Name); g != "" && !p.actor.Has(g) {
			return refuse(CodeApproverNotPermitted, "approving %s takes the %q grant", c.Name, g)
		}
	}
	return nil
}

// claim is the atomic claim: the run moves on only if it still waits on
// the very turn the decider saw, and the decision is recorded with it.
func (p *pipeline) claim(ctx context.Context, d DecisionRecord, standing []string) (*Continuation, error) {
	c, d, err := p.prepare(d, standing)
	if err != nil {
		return nil, err
	}
	if err := p.e.store.Claim(ctx, c); err != nil {
		return nil, p.claimFailed(ctx, err)
	}
	return p.won(c, d), nil
}

// prepare builds the claim of this pipeline's run and the decision it
// records (as the continuation reads it; the claim carries it sealed).
func (p *pipeline) prepare(d DecisionRecord, standing []string) (Claim, DecisionRecord, error) {
	d.RunID, d.TurnDigest, d.DecidedBy, d.DeciderName = p.runID, p.digest, p.actor.ID, p.actor.Name
	d.Tools = strings.Join(p.state.Pending.ToolNames(), ",")
	c := Claim{RunID: p.runID, From: p.waitFor, Digest: p.digest, Standing: standing}
	switch p.path {
	case PathDurable:
		c.To, d.Path = StatusDecided, PathDurable
	case PathRequest, "":
		c.To, d.Path = StatusRunning, PathRequest
		c.ClaimedBy, c.Lease = holderID(), p.e.lease
		c.Credential = p.e.credentialMint(p.run, p.cfg)
	default:
		return Claim{}, d, fmt.Errorf("runtime: decide: unknown path %q", p.path)
	}
	stored, err := p.e.sealDecision(d)
	if err != nil {
		return Claim{}, d, err
	}
	c.Decision = stored
	return c, d, nil
}

// won is a claim that went through: the continuation to run in the
// request, or nil on the durable path.
func (p *pipeline) won(c Claim, d DecisionRecord) *Continuation {
	p.e.metrics.DecisionClaimed(d.Path, d.Kind)
	if c.To == StatusDecided {
		return nil
	}
	run := *p.run
	run.Status, run.ClaimedBy = StatusRunning, c.ClaimedBy
	cont := p.e.continuation(&run, p.cfg, p.state, &d)
	cont.minted(c.Credential)
	return cont
}
