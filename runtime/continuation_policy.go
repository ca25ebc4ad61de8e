package runtime

import (
	"context"
	"strings"
)

// A continuation's rules: at a pause, the configuration's policy is asked
// about each call that waits for an approval, before any person is. The
// calls a rule approves or denies are decided in turns of their own, one
// per rule, each a step that records the rule's decision; the calls left
// go to a person in the pause after, with the votes the rules ask for.

// PolicyStore is what the rules need of the store beyond the Store: the
// run's owner, whom a rule may read.
type PolicyStore interface {
	// User returns a user by id, or an error wrapping ErrNotFound.
	User(ctx context.Context, id int64) (*User, error)
}

// pause asks about the unanswered calls that wait for an approval: the
// rules decide the ones they match, a person the rest.
func (c *Continuation) pause(ctx context.Context) (Outcome, bool) {
	left, err := c.rulesDecide(ctx, c.undecided())
	if err != nil {
		return c.stopped(err), true
	}
	if len(left) == 0 {
		// Every call is decided: the loop goes on with the first.
		return Outcome{}, false
	}
	return c.suspend(ctx, PendingTurn{Kind: TurnApproval, Calls: left})
}

// rulesDecide decides the calls whose first matching rule approves or
// denies them, one step per rule, and returns the calls left to a person.
func (c *Continuation) rulesDecide(ctx context.Context, calls []ToolCall) ([]ToolCall, error) {
	var left []ToolCall
	var order []*Rule
	byRule := map[*Rule][]ToolCall{}
	for _, call := range calls {
		r := c.match(ctx, call).Rule
		if r == nil || (r.Then != RuleApprove && r.Then != RuleDeny) {
			left = append(left, call)
			continue
		}
		if _, ok := byRule[r]; !ok {
			order = append(order, r)
		}
		byRule[r] = append(byRule[r], call)
	}
	for _, r := range order {
		if err := c.ruleDecide(ctx, r, byRule[r]); err != nil {
			return nil, err
		}
	}
	return left, nil
}

// ruleDecide records a rule's decision of the calls it matched as a turn
// of its own: its decisions row (by nobody, policy the rule), its approval
// event by "policy:<name>", the verdicts, and a denied call's result for
// the model, all in one step under the lease. The decisions' unique key
// on the turn's digest makes a second decision of the turn impossible.
func (c *Continuation) ruleDecide(ctx context.Context, r *Rule, calls []ToolCall) error {
	turn := PendingTurn{Kind: TurnApproval, Calls: calls, Policy: r.Name}
	if c.run.ConversationTurn > 1 {
		turn.ConversationTurn = c.run.ConversationTurn
	}
	digest, err := Digest(turn)
	if err != nil {
		return err
	}
	by, approved := PolicyDecider(r.Name), r.Then == RuleApprove
	kind := DecisionDeny
	if approved {
		kind = DecisionApprove
	}
	for _, call := range calls {
		c.state.Verdicts[call.ID] = Verdict{Approved: approved, By: by, Reason: r.Reason}
		if !approved {
			msg := DeniedPrefix + by
			if r.Reason != "" {
				msg += ": " + r.Reason
			}
			c.state.Messages = append(c.state.Messages, Message{Role: "tool", ToolCallID: call.ID,
				ToolName: call.Name, Content: msg, IsError: true})
		}
	}
	path := PathRequest
	if c.durable {
		path = PathDurable
	}
	// Stored as a person's decision is, its reason sealed in its place.
	d, err := c.e.sealDecision(DecisionRecord{RunID: c.run.ID, TurnDigest: digest, Kind: kind, Tools: strings.Join(turn.ToolNames(), ","),
		Scope: ScopeOnce, Reason: r.Reason, DeciderName: by, Path: path, Policy: r.Name})
	if err != nil {
		return err
	}
	p := ApprovalPayload{By: by, Decision: kind, Calls: len(calls), Scope: ScopeOnce, Reason: r.Reason}
	return c.record(ctx, c.state.Iterations, 0, p, func(cm *Commit) { cm.Decision = &d })
}

// rulesAsk sets the approvals the turn's calls need from the rules that
// ask for votes (the most any of them asks), and which rule asked, by
// call id, for the card.
func (c *Continuation) rulesAsk(ctx context.Context, turn *PendingTurn) {
	if turn.Kind != TurnApproval {
		return
	}
	for _, call := range turn.Calls {
		r := c.match(ctx, call).Rule
		if r == nil || r.Then != RuleVotes {
			continue
		}
		turn.ApprovalsRequired = max(turn.ApprovalsRequired, r.Votes)
		if turn.Rules == nil {
			turn.Rules = map[string]string{}
		}
		turn.Rules[call.ID] = r.Name
	}
}

// match is what the rules say of a call, evaluated once per call by this
// continuation (rulesDecide and rulesAsk both ask). A rule whose
// evaluation fails leaves the call to a person, and the log says why.
func (c *Continuation) match(ctx context.Context, call ToolCall) RuleMatch {
	if m, ok := c.matches[call.ID]; ok {
		return m
	}
	cp := c.cfg.policy()
	if cp == nil {
		return RuleMatch{}
	}
	if c.matches == nil {
		c.matches = map[string]RuleMatch{}
	}
	if cp.err != nil {
		c.e.log.Warn("policy does not compile: a person decides", "run", c.run.ID, "configuration", c.cfg.Identifier, "err", cp.err)
		c.matches[call.ID] = RuleMatch{}
		return RuleMatch{}
	}
	owner, err := c.ruleOwner(ctx)
	if err != nil {
		c.e.log.Warn("policy cannot read the run's owner: a person decides", "run", c.run.ID, "err", err)
		c.matches[call.ID] = RuleMatch{}
		return RuleMatch{}
	}
	m := cp.Match(PolicyInput{Tool: call.Name, Args: policyArgs(call.Arguments), Owner: owner,
		Configuration: c.cfg.Identifier, Turn: max(c.run.ConversationTurn, 1)})
	if m.Err != nil {
		c.e.log.Warn("policy rule failed: a person decides", "run", c.run.ID, "rule", m.ErrRule, "call", call.ID, "err", m.Err)
	}
	c.matches[call.ID] = m
	return m
}

// ruleOwner reads the run's owner once per continuation, for the rules.
func (c *Continuation) ruleOwner(ctx context.Context) (RuleOwner, error) {
	if c.owner != nil {
		return *c.owner, nil
	}
	u, err := c.e.store.User(ctx, c.run.OwnerID)
	if err != nil {
		return RuleOwner{}, err
	}
	grants := u.Grants
	if grants == nil {
		grants = []string{}
	}
	c.owner = &RuleOwner{Name: u.Name, Role: string(u.Role), Grants: grants}
	return *c.owner, nil
}
