package configfile

import "github.com/turnstile-dev/turnstile/runtime"

// deadline reads the deadline keys of a mapping (the configuration's or
// a tool policy's), each error at the line of the key it is about. Only a
// sound deadline is returned, so Normalize never reports it again without
// a line.
func (p *parser) deadline(fields map[string]entry) runtime.Deadline {
	before := len(p.errs)
	var d runtime.Deadline
	read := func(key string, dst *string) (entry, bool) {
		e, ok := fields[key]
		if ok {
			*dst, _ = p.str(e)
		}
		return e, ok && *dst != ""
	}
	timeout, hasTimeout := read("decision_timeout", &d.DecisionTimeout)
	onTimeout, hasOn := read("on_timeout", &d.OnTimeout)
	grant, hasGrant := read("escalate_grant", &d.EscalateGrant)
	if hasTimeout {
		if _, err := runtime.ParseDecisionTimeout(d.DecisionTimeout); err != nil {
			p.fail(timeout.value, "%s", err.Error())
		}
	}
	if hasOn && d.OnTimeout != runtime.OnTimeoutDeny && d.OnTimeout != runtime.OnTimeoutEscalate {
		p.fail(onTimeout.value, "on_timeout must be deny or escalate, not %q", d.OnTimeout)
	}
	switch {
	case !hasTimeout && (hasOn || hasGrant):
		at := onTimeout.key
		if !hasOn {
			at = grant.key
		}
		p.fail(at, "on_timeout and escalate_grant take effect only with a decision_timeout")
	case d.OnTimeout == runtime.OnTimeoutEscalate && !hasGrant:
		p.fail(onTimeout.key, "escalate_grant is required with on_timeout: escalate (the grant whose holders decide an expired turn)")
	case hasGrant && d.OnTimeout != runtime.OnTimeoutEscalate:
		p.fail(grant.key, "escalate_grant takes effect only with on_timeout: escalate")
	}
	if len(p.errs) != before {
		return runtime.Deadline{}
	}
	return d
}
