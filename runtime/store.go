package runtime

import (
	"context"
	"encoding/json"
	"time"
)

// Store is what the engine needs of the database. Every method that
// changes a run is one transaction guarded by the run's status and, where a
// lease is held, by the holder; a guard that changes no row is an error, so
// no transition can be won twice. What a bulk decision (BulkStore), the
// followers' poll (FollowStore) and an erase (EraseStore) need are named
// apart, beside the code that uses them.
type Store interface {
	BulkStore
	FollowStore
	ChangeStore
	EraseStore
	MessageStore
	PartialStore
	PolicyStore
	VoteStore
	// Configuration returns a configuration by id, or ErrNotFound.
	Configuration(ctx context.Context, id int64) (*Configuration, error)
	// ConfigurationByIdentifier returns a configuration, or ErrNotFound.
	ConfigurationByIdentifier(ctx context.Context, identifier string) (*Configuration, error)
	// Run returns a run, or ErrNotFound (also for an erased one).
	Run(ctx context.Context, id int64) (*Run, error)
	// RunSynced is Run as the whole cluster has it: on a multi-primary
	// cluster it first waits until this node applied every commit made
	// anywhere before the read, which a lost claim's classification
	// needs; on a single server it is Run.
	RunSynced(ctx context.Context, id int64) (*Run, error)
	// RunForDecision returns a run and its configuration in one round
	// trip, or ErrNotFound; the configuration is nil when it is gone.
	RunForDecision(ctx context.Context, id int64) (*Run, *Configuration, error)
	// CreateRun inserts a run, running and claimed by r.ClaimedBy for the
	// lease, or queued, and sets its ID; content, given that ID, returns
	// the run's sealed content (bound to the run, hence sealed only once
	// the INSERT made its id), written with the row in one transaction and
	// set on r.
	CreateRun(ctx context.Context, r *Run, lease time.Duration, content func(id int64) (NewRunContent, error)) error
	// SetTitle sets a run's sealed title from a source (TitleSet,
	// TitleGenerated); a generated one only over a cut one, else
	// ErrClaimLost; ErrNotFound for no run.
	SetTitle(ctx context.Context, runID int64, title, source string) error
	// StartTurn starts a settled run's next turn (see NextTurn) in one
	// transaction; ErrClaimLost when the run is no longer settled at that
	// turn (another message started it first, or it is not settled).
	StartTurn(ctx context.Context, t NextTurn) error
	// Resume returns what the holder of a claimed run needs beyond its
	// row, in one round trip: see Resumed.
	Resume(ctx context.Context, runID int64, withMessages bool) (Resumed, error)
	// Claim moves a waiting run on and records its decision in one
	// transaction; ErrClaimLost when the guard or the decision's unique key
	// says someone else won.
	Claim(ctx context.Context, c Claim) error
	// Commit records one step: the event, the checkpointed state, the lease,
	// and optionally the run's next status, in one transaction. It reports
	// whether someone asked to cancel the run, so the holder stops at this
	// step boundary. ErrLeaseLost when the holder does not hold the run;
	// ErrCancelRequested (and nothing written) when a suspension meets a
	// cancel request.
	Commit(ctx context.Context, c Commit) (cancel bool, err error)
	// RenewLeases extends the leases of many held runs at once and returns
	// the runs among them that their holder no longer holds.
	RenewLeases(ctx context.Context, held []Lease, lease time.Duration) (lost []int64, err error)
	// CancelsRequested lists the running runs someone asked to cancel,
	// each with its holder, in one cheap read.
	CancelsRequested(ctx context.Context) ([]Lease, error)
	// MarkPendingEffect stamps the call whose non-idempotent write is about
	// to run (and renews the lease); ErrLeaseLost when not held,
	// ErrCancelRequested (nothing stamped) when someone asked to cancel
	// the run: the write must not start.
	MarkPendingEffect(ctx context.Context, runID int64, claimedBy, callID string, lease time.Duration) error
	// WaitingPage lists up to q.Limit runs waiting for a decision, oldest
	// first, from q.After, with their owner's name, and counts how many
	// wait that q matches in all.
	WaitingPage(ctx context.Context, q WaitingQuery) ([]*Run, int, error)
	// History lists up to limit runs newest first, with the viewer's latest
	// decision about each: see HistoryQuery.
	History(ctx context.Context, q HistoryQuery, limit int) ([]HistoryRow, error)
	// ContinuingRuns lists the interactive runs that continue in the
	// background (decided or running) which a user owns or decided.
	ContinuingRuns(ctx context.Context, userID int64, limit int) ([]*Run, error)
	// Events returns a run's events after a seq, in order.
	Events(ctx context.Context, runID int64, afterSeq int) ([]Event, error)
	// LastSeq returns the highest event seq of a run, 0 when it has none.
	LastSeq(ctx context.Context, runID int64) (int, error)
	// Decision returns the decision recorded for a turn, or ErrNotFound.
	Decision(ctx context.Context, runID int64, digest string) (*DecisionRecord, error)
	// LatestDecisionBy returns a user's latest decision about a run, or
	// ErrNotFound.
	LatestDecisionBy(ctx context.Context, runID, userID int64) (*DecisionRecord, error)
	// RequestCancel flags a running run for cancellation at its next step
	// boundary; ErrClaimLost when it is not running any more.
	RequestCancel(ctx context.Context, runID int64) error
	// ClaimDecided, ClaimQueued and ClaimExpired hand a worker the oldest
	// decided run, the oldest queued run, or the running run whose lease
	// expired longest ago (its holder died); ErrNotFound when there is none.
	ClaimDecided(ctx context.Context, claimedBy string, lease time.Duration) (*Run, error)
	ClaimQueued(ctx context.Context, claimedBy string, lease time.Duration) (*Run, error)
	ClaimExpired(ctx context.Context, claimedBy string, lease time.Duration) (*Run, error)
	// ExpiredPauses lists up to limit waiting runs whose decision deadline
	// passed, the longest expired first; none is an empty list. The
	// caller settles each through Claim, which alone decides who wins.
	ExpiredPauses(ctx context.Context, limit int) ([]int64, error)
	// CancelIdle cancels a run nobody holds (queued, waiting or decided) and
	// records the events and the notifications, guarded by its status;
	// the events carry the run's next seqs. ErrClaimLost when it moved:
	// its status changed, or other events took those seqs.
	CancelIdle(ctx context.Context, runID int64, from Status, events []Event, notes []Delivery) error
	// UnsettledRuns lists the runs a user owns that have not settled, by
	// id (their id, configuration and status at least); none is an empty
	// list.
	UnsettledRuns(ctx context.Context, ownerID int64) ([]*Run, error)
	// DeleteUser deletes a user, their API tokens, and cancels their
	// unsettled runs in one transaction (see UserDeletion) and reports how
	// many tokens it deleted; ErrNotFound for no such user, ErrClaimLost
	// when the user's unsettled runs are not d.Runs, both with nothing
	// written.
	DeleteUser(ctx context.Context, d UserDeletion) (tokens int, err error)
	// OwnerDeleted reports whether the owner of a run no longer exists
	// (true, too, for a run that does not exist).
	OwnerDeleted(ctx context.Context, runID int64) (bool, error)
}

// NewRunContent is what a new run stores sealed: its state, its prompt,
// and its first transcript messages.
type NewRunContent struct {
	State    []byte
	Prompt   string
	Title    string // sealed like the prompt
	Messages [][]byte
	// Started is the payload of the run's first event, turn 1's
	// turn_started, sealed for seq 1.
	Started json.RawMessage
	// Credential is minted with the run: a forwarding run's that starts
	// running (see identity.go).
	Credential *CredentialMint
}

// Resumed is what a continuation reads when it starts.
type Resumed struct {
	// LastSeq is the highest event seq of the run, 0 when it has none.
	LastSeq int
	// Messages are the run's sealed transcript messages in order; nil when
	// not asked for.
	Messages [][]byte
	// Standing are the tool names approved for the whole run.
	Standing []string
	// OwnerDeleted says the run's owner no longer exists: the holder
	// cancels the run before any step.
	OwnerDeleted bool
}

// Claim is the atomic claim of a waiting run.
type Claim struct {
	RunID     int64
	From      Status
	Digest    string
	To        Status // StatusRunning (in request) or StatusDecided (durable)
	ClaimedBy string // empty for the durable path
	// Lease is how long the claim holds before a worker may take it over;
	// leases are computed on the database's clock.
	Lease    time.Duration
	Decision DecisionRecord
	// Standing are tool names approved for the rest of the run.
	Standing []string
	// Notifications go into the outbox if the claim wins (an expiry's).
	Notifications []Delivery
	// Credential is minted by the claim if it wins: a forwarding run's,
	// on the request path (see identity.go).
	Credential *CredentialMint
}

// DecisionRecord is one row of the decisions table.
type DecisionRecord struct {
	RunID      int64  `db:"run_id"`
	TurnDigest string `db:"turn_digest"`
	Kind       string `db:"kind"` // approve, deny, input
	// Tools names, comma-separated, the tools of the turn it decided.
	Tools       string          `db:"tools"`
	Scope       string          `db:"scope"`
	Reason      string          `db:"reason"`
	Input       json.RawMessage `db:"input"`
	DecidedBy   int64           `db:"decided_by"` // 0: nobody (an expiry)
	DeciderName string          `db:"decider_name"`
	DecidedAt   time.Time       `db:"decided_at"`
	Path        string          `db:"path"` // request or durable
	// Outcome is how the continuation that carried it out ended, once it
	// did (waiting, completed, failed, cancelled).
	Outcome string `db:"outcome"`
	// Arguments are an approval's replacement arguments: a JSON object of
	// arguments objects by call id, each validated against its call's
	// tool; empty when nothing was edited. The turn digest still names the
	// turn as it was offered: the edit belongs to the decision.
	Arguments json.RawMessage `db:"arguments"`
	// Calls are the choices of a turn decided call by call: a JSON object
	// of {"decision","reason"} by call id, naming every call of the turn
	// (see decide_calls.go); empty for a decision of the whole turn.
	// Kind is then DecisionMixed when the choices differ.
	Calls json.RawMessage `db:"calls"`
	// Policy names the rule that made the decision (DecidedBy 0,
	// DeciderName "policy:<name>"); "" for a person's or an expiry's.
	Policy string `db:"policy"`
}

// Decision kinds, scopes and paths.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
	// DecisionMixed is the kind of a turn decided call by call with some
	// calls approved and some denied. An older process, which knows no
	// such kind, applies it as a denial of every call: it never runs a
	// call that was denied.
	DecisionMixed = "mixed"
	DecisionInput = "input"
	ScopeOnce     = "once"
	ScopeSession  = "session"
	PathRequest   = "request"
	PathDurable   = "durable"
)

// Commit is one recorded step and what it changes about the run.
type Commit struct {
	RunID     int64
	ClaimedBy string
	Event     Event
	// Ahead are events that precede Event in the same commit (a settle's
	// turn_ended), stored as they are.
	Ahead []Event
	// State is the sealed checkpoint; nil keeps the stored one, which the
	// step did not change.
	State []byte
	// Messages are the sealed transcript messages this step added; the
	// first of them has index FirstMessage.
	Messages     [][]byte
	FirstMessage int
	// Turn is the conversation's turn of the step: its event and messages
	// are marked with it.
	Turn  int
	Lease time.Duration
	// PendingEffect is the call whose write is in flight after this step;
	// "" clears it. A step that keeps the run running writes it only when
	// it names one or Stamped says one may be stamped (this continuation
	// stamped one, or found one when it resumed the run); every other step
	// clears it.
	PendingEffect string
	Stamped       bool
	Iterations    int
	Usage         Usage
	// Status, when not StatusRunning, ends the hold: the run is suspended
	// (with TurnDigest), settled (with TerminationReason and Answer), or
	// handed back to the workers (decided or queued). A commit whose Event
	// has no Kind records no event.
	Status     Status
	TurnDigest string
	// PendingTools names, comma-separated, the tools of a suspension's
	// turn, which the inbox filters by (the turn itself may be sealed).
	PendingTools string
	// DecisionTimeout, on a suspension, sets the turn's deadline that long
	// after the commit, on the database's clock; 0 sets none.
	DecisionTimeout time.Duration
	// ApprovalsRequired, on a suspension, is the turn's (see votes.go),
	// stored beside its digest; 0 and 1 store none.
	ApprovalsRequired int
	TerminationReason string
	Answer            string
	// Executed marks the decision of this turn as being carried out.
	Executed string
	// Outcome, with OutcomeDigest, records how the decision's continuation
	// ended on its decisions row.
	Outcome       string
	OutcomeDigest string
	// Rewrite: Messages replace the stored messages from FirstMessage on
	// instead of following them. An approval that edited a call rewrites
	// the model's message that made it, so that the transcript shows the
	// call as executed.
	Rewrite bool
	// Notifications go into the outbox in this very commit, if the guard
	// holds: none is sent for a step that did not commit, none is lost
	// for one that did.
	Notifications []Delivery
	// Decision is a rule's decision of a turn of its own, which this
	// step applies: written with the step if the guard holds, and, by the
	// decisions' unique key, at most once for its turn.
	Decision *DecisionRecord
}
