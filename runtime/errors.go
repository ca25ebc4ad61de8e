package runtime

import (
	"errors"
	"fmt"
)

// Code names why the engine refused a request. Every surface maps a code to
// its own answer (a flash, a status code) in one place.
type Code string

// The refusals of the decision pipeline, in the order the checks run, and
// the ones a lost claim is classified as. There is no "not permitted": who
// may not decide a run may not read it either, and is told not_found,
// exactly as for a run that does not exist.
const (
	CodeNotFound              Code = "not_found"
	CodeNotWaiting            Code = "not_waiting"
	CodeProcessRun            Code = "process_run"
	CodeInactiveConfiguration Code = "inactive_configuration"
	CodeFourEyes              Code = "four_eyes"
	CodeUnreadableState       Code = "unreadable_state"
	CodeApproverNotPermitted  Code = "approver_not_permitted"
	CodeInvalidInput          Code = "invalid_input"
	CodeStaleTurn             Code = "stale_turn"
	CodeAlreadyResuming       Code = "already_resuming"
	CodeInvalidRequest        Code = "invalid_request"
	// CodeAlreadyVoted: a second approval of one person of a turn that
	// needs several (votes.go); nothing written.
	CodeAlreadyVoted Code = "already_voted"
	// CodeRunBusy: a follow-up message to a run whose turn still runs or
	// waits for a decision (one active turn per conversation).
	CodeRunBusy Code = "run_busy"
)

// Refusals of every surface, not of the pipeline.
const (
	// CodeTooManyRequests: the caller has as many requests, or as many
	// streams, open at once as one user may; nothing of this one was read
	// or written. It may be sent again once one of them has ended.
	CodeTooManyRequests Code = "too_many_requests"
	// CodeCursorExpired: the feed's cursor is older than its change log
	// keeps changes (GET /api/feed?after=): read afresh, attach anew.
	CodeCursorExpired Code = "cursor_expired"
)

// Refusal is the one error type the engine returns for a request it will not
// carry out. Nothing was written when a Refusal is returned.
type Refusal struct {
	Code    Code
	Message string
	// Fields holds one message per input field for CodeInvalidInput.
	Fields map[string]string
	// Digest is the run's current turn digest for CodeStaleTurn.
	Digest string
	// Decided is, for CodeAlreadyResuming, the decision that won the turn
	// and how the run stands now (see DecisionSummary); nil when the turn
	// was not found decided (a run resumed on another turn).
	Decided *DecisionSummary
}

func (r *Refusal) Error() string { return fmt.Sprintf("%s: %s", r.Code, r.Message) }

func refuse(code Code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of a Refusal anywhere in err's chain, or "".
func CodeOf(err error) Code {
	var r *Refusal
	if errors.As(err, &r) {
		return r.Code
	}
	return ""
}

// Errors the store returns; the engine turns them into refusals or outcomes.
var (
	// ErrNotFound is a read of a row that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrClaimLost is a guarded update that changed no row, or a decision
	// for a turn that has one already.
	ErrClaimLost = errors.New("claim lost")
	// ErrLeaseLost is a write of a continuation that no longer holds its
	// run.
	ErrLeaseLost = errors.New("lease lost")
	// ErrCancelRequested: a suspension met a request to cancel the run;
	// the holder settles it as cancelled instead.
	ErrCancelRequested = errors.New("cancel requested")
	// ErrKeyMissing: a blob was sealed under a key this process does not
	// hold. Unlike a corrupt blob it is readable elsewhere (a process
	// configured with the key), so no run is settled because of it.
	ErrKeyMissing = errors.New("sealed under a key this process does not hold")
	// ErrNotSealed: state keys are set and a sealed column holds plain
	// content — stored before keys were set, or written there by someone
	// without a key. It is not taken for the run's; like ErrKeyMissing it
	// settles no run, since turnstile state reseal makes it readable.
	ErrNotSealed = errors.New("stored plain where state keys require it sealed")
)

// awaitsOperator reports whether content failed to open only for want of
// an operator's step — a key configured, or state reseal run — and so is
// to be left as it is rather than settled as unreadable.
func awaitsOperator(err error) bool {
	return errors.Is(err, ErrKeyMissing) || errors.Is(err, ErrNotSealed)
}
