package runtime

import (
	"encoding/json"
	"time"
)

// Status is where a run stands. Every change of status is one guarded
// update in the store.
type Status string

// The statuses of a run. Waiting runs wait for a person, decided ones for
// a worker; completed, failed and cancelled are settled for good.
const (
	StatusQueued             Status = "queued"
	StatusRunning            Status = "running"
	StatusWaitingForApproval Status = "waiting_for_approval"
	StatusWaitingForInput    Status = "waiting_for_input"
	StatusDecided            Status = "decided"
	StatusCompleted          Status = "completed"
	StatusFailed             Status = "failed"
	StatusCancelled          Status = "cancelled"
)

// Terminal reports whether a run in this status is settled for good.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Waiting reports whether a run in this status waits for a person.
func (s Status) Waiting() bool {
	return s == StatusWaitingForApproval || s == StatusWaitingForInput
}

// Origin says who decides a run's pauses.
type Origin string

const (
	// OriginInteractive runs are decided by people in the inbox.
	OriginInteractive Origin = "interactive"
	// OriginProcess runs are decided by the automated process that started
	// them; the inbox refuses them.
	OriginProcess Origin = "process"
)

// Termination reasons stored with a settled run.
const (
	ReasonCompleted      = "completed"
	ReasonMaxIterations  = "max_iterations"
	ReasonDenied         = "approval_denied"
	ReasonProviderFailed = "provider_failed"
	ReasonCancelled      = "cancelled"
	ReasonToolMissing    = "tool_unavailable"
	ReasonWriteUnknown   = "lease_lost_write_unknown"
	ReasonUnreadable     = "unreadable_state"
	// ReasonOwnerDeleted settles, as cancelled, the runs of a user who was
	// deleted: nobody may decide them or act as that user any more.
	ReasonOwnerDeleted = "owner_deleted"
)

// Run is one execution of a configuration for its owner, as stored.
type Run struct {
	ID              int64  `db:"id"`
	ConfigurationID int64  `db:"configuration_id"`
	OwnerID         int64  `db:"owner_id"`
	Origin          Origin `db:"origin"`
	Status          Status `db:"status"`
	Turn            int    `db:"turn"`
	// ConversationTurn is the number of the conversation's turn: 1 for
	// the first prompt, one more for each follow-up message.
	ConversationTurn  int        `db:"conversation_turn"`
	TurnDigest        string     `db:"turn_digest"`
	State             []byte     `db:"state"` // the sealed State; see Sealer
	ClaimedBy         string     `db:"claimed_by"`
	LeaseExpiresAt    *time.Time `db:"lease_expires_at"`
	PendingEffect     string     `db:"pending_effect"`
	CancelRequested   bool       `db:"cancel_requested"`
	TerminationReason string     `db:"termination_reason"`
	Prompt            string     `db:"prompt"`
	// Title is the run's title (see title.go), sealed like the prompt;
	// TitleSource says where it came from.
	Title        string     `db:"title"`
	TitleSource  string     `db:"title_source"`
	Answer       string     `db:"answer"`
	Iterations   int        `db:"iterations"`
	InputTokens  int        `db:"input_tokens"`
	OutputTokens int        `db:"output_tokens"`
	CreatedAt    time.Time  `db:"created_at"`
	UpdatedAt    time.Time  `db:"updated_at"`
	WaitingSince *time.Time `db:"waiting_since"`
	// DecisionDeadline is when the pending turn expires, on the
	// database's clock; nil without a deadline or while not waiting.
	DecisionDeadline *time.Time `db:"decision_deadline"`
	// ErasedAt and ErasedBy say when and by whom the run's content was
	// erased (see Engine.Erase); nil while it has content. Only the
	// history reads erased runs: every other read finds none.
	ErasedAt *time.Time `db:"erased_at"`
	ErasedBy *int64     `db:"erased_by"`
	// OwnerName is the owner's user name, where a list reads it.
	OwnerName string `db:"owner_name"`
	// OwnerDeleted says the owner no longer exists, where the reads for a
	// decision (RunForDecision, RunsForDecision) say it; false elsewhere.
	OwnerDeleted bool `db:"owner_deleted"`
	// ApprovalsRequired is how many approvals the turn it waits on needs
	// (see votes.go), 0 for one; Votes are the votes on that turn so far,
	// where a read of one run or of the waiting runs reads them.
	ApprovalsRequired int   `db:"approvals_required"`
	Votes             Votes `db:"-"` // read apart (the store's readVotes)
}

// Role is what a user may do beyond deciding their own runs.
type Role string

// The two roles.
const (
	RoleAdmin Role = "admin"
	RoleUser  Role = "user"
)

// GrantApprove lets a user decide runs they do not own.
const GrantApprove = "approve"

// Actor is the person (or token holder) asking the engine to do something.
type Actor struct {
	ID     int64
	Name   string
	Role   Role
	Grants []string
}

// MayRead reports whether the actor may read the content of a run its
// owner owns: the owner and admins.
func (a Actor) MayRead(owner int64) bool {
	return a.Role == RoleAdmin || a.ID == owner
}

// MayDecide reports whether the actor may decide the turns of a run its
// owner owns at all: the owner, admins, and holders of the approve grant
// (which admins hold). Anyone else learns nothing about the run from any
// route.
func (a Actor) MayDecide(owner int64) bool {
	return a.ID == owner || a.Has(GrantApprove)
}

// Has reports whether the actor holds grant; admins hold every grant.
func (a Actor) Has(grant string) bool {
	if a.Role == RoleAdmin {
		return true
	}
	for _, g := range a.Grants {
		if g == grant {
			return true
		}
	}
	return false
}

// Message is one entry of a run's transcript.
type Message struct {
	Role    string `json:"role"` // system, user, assistant, tool
	Content string `json:"content,omitempty"`
	// Thinking is the reasoning an assistant message streamed
	// (reasoning_content); it is never sent back to the model.
	Thinking   string     `json:"thinking,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`
	IsError    bool       `json:"is_error,omitempty"`
}

// ToolCall is one call of a tool that the model asked for.
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// Usage counts the provider's tokens.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}
