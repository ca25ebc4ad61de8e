package runtime

import (
	"fmt"
	"time"
)

// MinDecisionTimeout is the shortest decision_timeout a configuration may
// name: the workers sweep on a poll of about a second, so a shorter one
// would promise what they cannot keep.
const MinDecisionTimeout = time.Second

// What a worker does with a pause whose deadline passed.
const (
	// OnTimeoutDeny records a denial by nobody ("no decision within …").
	OnTimeoutDeny = "deny"
	// OnTimeoutEscalate re-offers the turn, once, to holders of the
	// escalation grant only, with a fresh deadline.
	OnTimeoutEscalate = "escalate"
)

// DecisionEscalate is the kind of the decision by nobody that moves an
// expired turn on to the escalation grant's holders.
const DecisionEscalate = "escalate"

// PathExpiry is the path of a decision by nobody: a worker recorded it
// when the pause expired, and carries it out.
const PathExpiry = "expiry"

// Deadline bounds how long a pause waits for a person, for a whole
// configuration or one tool (in tool_policies). Its zero value sets none.
type Deadline struct {
	// DecisionTimeout is a Go duration ("24h"); "" means no deadline.
	DecisionTimeout string `json:"decision_timeout,omitempty" yaml:"decision_timeout"`
	// OnTimeout is OnTimeoutDeny (the default) or OnTimeoutEscalate.
	OnTimeout string `json:"on_timeout,omitempty" yaml:"on_timeout"`
	// EscalateGrant is the grant whose holders alone may decide an
	// escalated turn; required with OnTimeoutEscalate.
	EscalateGrant string `json:"escalate_grant,omitempty" yaml:"escalate_grant"`
}

// ParseDecisionTimeout reads a decision_timeout; the error says what a
// person should write instead.
func ParseDecisionTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("decision_timeout must be a duration such as 30m or 24h, not %q", s)
	}
	if d < MinDecisionTimeout {
		return 0, fmt.Errorf("decision_timeout must be at least %s, not %s", MinDecisionTimeout, s)
	}
	return d, nil
}

// Check reports the first rule the deadline breaks, its message starting
// with the key it is about; nil when it is sound.
func (d Deadline) Check() error {
	if d.DecisionTimeout == "" {
		if d.OnTimeout != "" || d.EscalateGrant != "" {
			return fmt.Errorf("on_timeout and escalate_grant take effect only with a decision_timeout")
		}
		return nil
	}
	if _, err := ParseDecisionTimeout(d.DecisionTimeout); err != nil {
		return err
	}
	switch d.OnTimeout {
	case "", OnTimeoutDeny:
		if d.EscalateGrant != "" {
			return fmt.Errorf("escalate_grant takes effect only with on_timeout: escalate")
		}
	case OnTimeoutEscalate:
		if d.EscalateGrant == "" {
			return fmt.Errorf("escalate_grant is required with on_timeout: escalate (the grant whose holders decide an expired turn)")
		}
	default:
		return fmt.Errorf("on_timeout must be deny or escalate, not %q", d.OnTimeout)
	}
	return nil
}

// timeout is the deadline's duration, 0 for none (or one Check refuses).
func (d Deadline) timeout() time.Duration {
	if d.DecisionTimeout == "" {
		return 0
	}
	t, err := ParseDecisionTimeout(d.DecisionTimeout)
	if err != nil {
		return 0
	}
	return t
}

// TurnDeadline is the deadline that applies to one pending turn.
type TurnDeadline struct {
	// Timeout is 0 when the turn has no deadline.
	Timeout       time.Duration
	OnTimeout     string // OnTimeoutDeny or OnTimeoutEscalate
	EscalateGrant string
}

// TurnDeadline is the deadline of a turn: the shortest decision_timeout
// that applies to any of its calls (a tool's policy where it names one,
// else the configuration's), with the on_timeout and escalate_grant of
// the source it came from. A turn waits no longer than its most urgent
// call allows; on a tie a tool's policy wins over the configuration's.
func (c *Configuration) TurnDeadline(t *PendingTurn) TurnDeadline {
	var best TurnDeadline
	consider := func(d Deadline, tool bool) {
		to := d.timeout()
		if to == 0 || (best.Timeout != 0 && (to > best.Timeout || (to == best.Timeout && !tool))) {
			return
		}
		best = TurnDeadline{Timeout: to, OnTimeout: d.OnTimeout, EscalateGrant: d.EscalateGrant}
		if best.OnTimeout == "" {
			best.OnTimeout = OnTimeoutDeny
		}
	}
	for _, call := range t.Calls {
		if p, ok := c.ToolPolicies[call.Name]; ok && p.DecisionTimeout != "" {
			consider(p.Deadline, true)
			continue
		}
		consider(c.Deadline, false)
	}
	return best
}

// ExpiryReason is what the model reads, and the decision row records, for
// a pause that nobody decided in time.
func ExpiryReason(timeout time.Duration) string {
	return ExpiredPrefix + timeout.String()
}

// ExpiredPrefix starts the tool result of a call nobody decided in time,
// as DeniedPrefix starts one a person denied.
const ExpiredPrefix = "no decision within "
