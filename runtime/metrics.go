package runtime

import "time"

// Metrics is told what the engine does, for a monitoring system; the
// engine declares it and the web layer implements it with Prometheus. Its
// methods run on the engine's hot paths: they must be cheap, must not
// block, and must be safe for concurrent use.
type Metrics interface {
	// ContinuationStarted and ContinuationEnded bracket every
	// Continuation.Run, a request's and a worker's alike.
	ContinuationStarted()
	ContinuationEnded()
	// StepRecorded is told of every committed step: took is the whole
	// step (the provider round or the tool call, then its commit), commit
	// the commit alone (checkpoint encoding and the transaction).
	StepRecorded(kind EventKind, took, commit time.Duration)
	// DecisionClaimed is told of a decision that won its claim: path is
	// PathRequest or PathDurable, kind DecisionApprove, DecisionDeny or
	// DecisionInput.
	DecisionClaimed(path, kind string)
	// ClaimLost is told of a decision whose claim someone else won, with
	// the refusal it was classified as: CodeStaleTurn,
	// CodeAlreadyResuming or CodeNotWaiting.
	ClaimLost(reason Code)
	// Recovered is told when a worker takes over a running run whose
	// lease expired: its holder died.
	Recovered()
	// DecisionExpired is told of a pause a worker settled because its
	// deadline passed: action is OnTimeoutDeny or OnTimeoutEscalate.
	DecisionExpired(action string)
}

// noMetrics is the default: it measures nothing.
type noMetrics struct{}

func (noMetrics) ContinuationStarted()                                 {}
func (noMetrics) ContinuationEnded()                                   {}
func (noMetrics) StepRecorded(EventKind, time.Duration, time.Duration) {}
func (noMetrics) DecisionClaimed(string, string)                       {}
func (noMetrics) ClaimLost(Code)                                       {}
func (noMetrics) Recovered()                                           {}
func (noMetrics) DecisionExpired(string)                               {}
