package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Votes. A turn may need the approvals of several people
// (approvals_required: N, at the configuration's top level or in a tool's
// policy): each approval before the N-th is a vote, recorded for the turn
// digest it approved, and the N-th distinct voter's vote claims the turn in
// the same transaction, whose guard counts the votes (VoteStore). One
// denial by anyone who may decide the run ends the turn at once: it is an
// ordinary claim. Under four-eyes the owner's approval is refused as it
// always was (four_eyes), so the owner's vote never counts. A new turn has
// a new digest: the votes of the one before count no more.

// MaxApprovals bounds approvals_required.
const MaxApprovals = 50

// voteTries bounds how often a vote is made again because other votes on
// its turn were counted between its read and its write: each try after
// the first is one that lost to a vote that won, so a turn with fewer
// voters at once than this never refuses one.
const voteTries = 8

// Vote is one person's approval of a turn that needs several, as the run's
// JSON, its page and the inbox card show it.
type Vote struct {
	UserID int64     `json:"-"`
	User   string    `json:"user"`
	At     time.Time `json:"at"`
}

// Votes are the votes on a run's current turn, oldest first.
type Votes []Vote

// By reports whether the user voted.
func (v Votes) By(userID int64) bool {
	return slices.ContainsFunc(v, func(x Vote) bool { return x.UserID == userID })
}

// Ballot is one vote as the store records it.
type Ballot struct {
	RunID  int64
	Digest string
	From   Status
	UserID int64
	// Prior is how many votes the turn had when the voter's run was read:
	// the vote is recorded only if it still has exactly that many, so that
	// what it answers (and notifies) is the count it made.
	Prior int
	// Claim, when set, is the claim this vote makes as the N-th: it wins
	// only if the turn counts at least Required votes with this one.
	Claim    *Claim
	Required int
	// Notifications go into the outbox with the vote: its run.voted.
	Notifications []Delivery
}

// VoteStore is what a vote needs of the store.
type VoteStore interface {
	// Vote records a ballot in one transaction: the vote, and the claim
	// when it carries one. ErrClaimLost when the run no longer waits on
	// the digest or its turn no longer has b.Prior votes (the caller reads
	// it again), ErrAlreadyVoted when the user voted on the turn already;
	// both with nothing written.
	Vote(ctx context.Context, b Ballot) error
}

// ErrAlreadyVoted is a second vote of one person on one turn.
var ErrAlreadyVoted = errors.New("already voted")

// Voted is what Decide returns, in place of a continuation, for an
// approval that was recorded as a vote and did not complete the count: the
// turn still waits for more approvals. It is not a failure: errors.As
// tells a surface to answer with the count (see web's voted).
type Voted struct {
	RunID    int64
	Required int
	// Votes are the turn's votes, this one last.
	Votes Votes
}

func (v *Voted) Error() string {
	return fmt.Sprintf("run %d: vote recorded, %d of %d approvals", v.RunID, len(v.Votes), v.Required)
}

// checkApprovals is the rule every approvals_required obeys.
func checkApprovals(n int) error {
	if n < 0 || n > MaxApprovals {
		return fmt.Errorf("approvals_required must be between 1 and %d, not %d", MaxApprovals, n)
	}
	return nil
}

// Approvals is how many distinct people must approve a call of the tool:
// the larger of the configuration's and the tool's policy's, at least one.
func (c *Configuration) Approvals(tool string) int {
	return max(1, c.ApprovalsRequired, c.ToolPolicies[tool].ApprovalsRequired)
}

// votesAsk sets how many approvals an approval turn needs: the most any of
// its calls asks (or what a rule asked already); left 0 for one, so that
// the digests of turns without votes are what they always were.
func (c *Continuation) votesAsk(turn *PendingTurn) {
	if turn.Kind != TurnApproval {
		return
	}
	n := turn.ApprovalsRequired
	for _, call := range turn.Calls {
		n = max(n, c.cfg.Approvals(call.Name))
	}
	if n > 1 {
		turn.ApprovalsRequired = n
	}
}

// needsVotes reports whether the pipeline's approval is a vote: its turn
// asks more than one approval.
func (p *pipeline) needsVotes() bool {
	return p.approve && p.state.Pending != nil && p.state.Pending.ApprovalsRequired > 1
}

// checkVote refuses what a vote cannot carry, with nothing written: a
// turn decided call by call, edits (each voter approves the calls as
// offered; an edit would be approved by one person alone) and a standing approval (it would let later calls of
// the tool past the votes), and a second vote of one person.
func (p *pipeline) checkVote(d DecisionRecord, edits bool) error {
	if d.Kind == DecisionMixed {
		// A vote approves every call as offered; which calls run is not
		// the one voter's to say. One deny of the whole turn ends it.
		return refuse(CodeInvalidRequest, "run %d needs %d approvals, and each approval is a vote for every call: approve them all, or deny the turn", p.runID, p.state.Pending.ApprovalsRequired)
	}
	if edits {
		return refuse(CodeInvalidRequest, "run %d needs %d approvals: each approves the calls as offered, so none edits them", p.runID, p.state.Pending.ApprovalsRequired)
	}
	if d.Scope == ScopeSession {
		return refuse(CodeInvalidRequest, "run %d needs %d approvals: approve it once (an approval for the whole run would let later calls past the votes)", p.runID, p.state.Pending.ApprovalsRequired)
	}
	if p.run.Votes.By(p.actor.ID) {
		return refuse(CodeAlreadyVoted, "you already approved this turn of run %d", p.runID)
	}
	return nil
}

// vote records the pipeline's approval as a vote: the claim of the turn
// when it is the N-th, else a *Voted. Votes counted by others between the
// read and the write send it back to read the run again (up to voteTries).
func (p *pipeline) vote(ctx context.Context, d DecisionRecord) (*Continuation, error) {
	required := p.state.Pending.ApprovalsRequired
	for try := 1; ; try++ {
		prior := p.run.Votes
		b := Ballot{RunID: p.runID, Digest: p.digest, From: p.waitFor, UserID: p.actor.ID, Prior: len(prior), Required: required}
		var c Claim
		var stored DecisionRecord
		if len(prior)+1 >= required {
			var err error
			if c, stored, err = p.prepare(d, nil); err != nil {
				return nil, err
			}
			b.Claim = &c
		}
		if b.Claim == nil {
			// The N-th vote is the decision, which the run's next
			// notifications follow; each vote before it is told.
			notes, err := p.e.notifications(p.cfg, p.runID, notice{event: EventRunVoted, status: p.waitFor, digest: p.digest,
				turn: p.state.Pending, voter: p.actor.Name, votes: len(prior) + 1, required: required})
			if err != nil {
				return nil, err
			}
			b.Notifications = notes
		}
		err := p.e.store.Vote(ctx, b)
		switch {
		case err == nil && b.Claim != nil:
			return p.won(c, stored), nil
		case err == nil:
			votes := append(slices.Clone(prior), Vote{UserID: p.actor.ID, User: p.actor.Name, At: time.Now().UTC()})
			return nil, &Voted{RunID: p.runID, Required: required, Votes: votes}
		case errors.Is(err, ErrAlreadyVoted):
			return nil, refuse(CodeAlreadyVoted, "you already approved this turn of run %d", p.runID)
		case !errors.Is(err, ErrClaimLost):
			return nil, err
		}
		// Lost: the run moved on, or other votes were counted first.
		run, err := p.e.store.RunSynced(ctx, p.runID)
		if err != nil {
			return nil, fmt.Errorf("runtime: vote on run %d: %w", p.runID, err)
		}
		if run.Status != p.waitFor || run.TurnDigest != p.digest {
			return nil, p.claimFailed(ctx, ErrClaimLost)
		}
		if run.Votes.By(p.actor.ID) {
			return nil, refuse(CodeAlreadyVoted, "you already approved this turn of run %d", p.runID)
		}
		if try == voteTries {
			return nil, &Refusal{Code: CodeStaleTurn, Digest: p.digest,
				Message: "other approvals of this turn were counted while yours was; approve again"}
		}
		p.run.Votes = run.Votes
	}
}
