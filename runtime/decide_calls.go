package runtime

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// One decision per call. A turn with several pending calls may be decided
// call by call (DecideRequest.Calls): every call of the turn named, each
// approved or denied, with a reason of its own and, when approved, its
// edited arguments. The approved calls run; each denied call's result for
// the model is "denied by <name>: <reason>" (its own reason, else the
// decision's). The checks that concern approving — four-eyes, the grants,
// a standing approval's names — apply to the approved calls only: an owner
// under four-eyes may deny every call, and approve none.
//
// The decision records the choices beside its kind: approve when every
// call is approved, deny when every call is denied, DecisionMixed
// otherwise. The edits go where an approval's edits always went
// (arguments), so that an older process applying an all-approve decision
// runs the edited calls, and one applying a mixed decision, whose kind it
// does not know, denies every call: it never runs a call that was denied.
//
// Field keys of an invalid_input refusal about the choices: CallField(id,
// "") for the call as a whole ("calls.<call id>"), CallField(id, part) for
// one of its parts ("calls.<call id>.decision", "calls.<call id>.arguments.
// <property>"), the names the inbox card gives its controls.

// CallDecision is the choice about one call of a turn decided call by call.
type CallDecision struct {
	Decision string // DecisionApprove or DecisionDeny
	// Reason is the call's own; "" takes the decision's Reason.
	Reason string
	// Arguments replace the call's arguments: an approval of the call as
	// edited (see decide_edit.go). Only with DecisionApprove.
	Arguments json.RawMessage
}

// callChoice is one call's choice as the decision stores it (Calls).
type callChoice struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

// callsPrefix starts the names of a call's choice fields.
const callsPrefix = "calls."

// CallField is the key under which a refusal names a call's choice:
// "calls.<call id>" for the call as a whole, "calls.<call id>.<part>" for
// one part of it (decision, reason, arguments.<property>).
func CallField(callID, part string) string {
	if part == "" {
		return callsPrefix + callID
	}
	return callsPrefix + callID + "." + part
}

// validCalls refuses per-call choices that are malformed whatever the run,
// and settles the decision's kind: a decision given beside them must be
// what they make (approve when every call is approved, deny when every
// call is denied); left out, it is that kind, or DecisionMixed.
func validCalls(req *DecideRequest) error {
	if req.Rest != "" && req.Rest != DecisionApprove && req.Rest != DecisionDeny {
		return refuse(CodeInvalidRequest, "the decision of the calls left open must be approve or deny")
	}
	if len(req.Arguments) > 0 || hasEdits(req.Form) {
		return refuse(CodeInvalidRequest, "with calls, each approved call's edit goes in its own arguments (calls.<call id>.arguments)")
	}
	approved, denied := 0, 0
	for id, c := range req.Calls {
		switch c.Decision {
		case DecisionApprove:
			approved++
		case DecisionDeny:
			denied++
			if len(c.Arguments) > 0 {
				return refuse(CodeInvalidRequest, "call %q is denied: arguments come only with an approved call", id)
			}
		default:
			return refuse(CodeInvalidRequest, "the decision of call %q must be approve or deny", id)
		}
		if utf8.RuneCountInString(c.Reason) > maxReasonRunes || !utf8.ValidString(c.Reason) {
			return refuse(CodeInvalidRequest, "the reason of call %q must be valid text of at most %d characters", id, maxReasonRunes)
		}
	}
	// With Rest, the calls left open may go either way: the kind is
	// settled again once the turn is known (checkCalls).
	switch req.Rest {
	case DecisionApprove:
		approved++
	case DecisionDeny:
		denied++
	}
	kind := kindOf(approved, denied)
	if req.Decision != "" && req.Decision != kind {
		fields := map[string]string{}
		for id, c := range req.Calls {
			if c.Decision != req.Decision {
				fields[CallField(id, "decision")] = fmt.Sprintf("is %s, but the decision of the whole turn is %s", c.Decision, req.Decision)
			}
		}
		return &Refusal{Code: CodeInvalidInput, Fields: fields,
			Message: fmt.Sprintf("the calls do not make the decision %q of the whole turn: leave it out to decide call by call (%s)",
				req.Decision, describeFields(fields))}
	}
	req.Decision = kind
	return nil
}

// checkCalls refuses per-call choices that do not name the pending turn's
// calls exactly: an unknown call id, or a pending call left out (unless
// Rest decides it), each an invalid_input field. It keeps the choices on
// the pipeline, for the checks and the claim after it, and settles the
// decision's kind from them.
func (p *pipeline) checkCalls(req *DecideRequest) error {
	calls := req.Calls
	if calls == nil {
		return nil
	}
	if req.Rest != "" {
		calls = make(map[string]CallDecision, len(p.state.Pending.Calls))
		for _, c := range p.state.Pending.Calls {
			calls[c.ID] = CallDecision{Decision: req.Rest}
		}
		for id, c := range req.Calls {
			calls[id] = c
		}
	}
	fields := map[string]string{}
	pending := map[string]bool{}
	var ids, missing []string
	for _, c := range p.state.Pending.Calls {
		pending[c.ID] = true
		ids = append(ids, c.ID)
		if _, ok := calls[c.ID]; !ok {
			missing = append(missing, c.ID)
			fields[CallField(c.ID, "")] = fmt.Sprintf("needs a decision (%s): approve or deny", c.Name)
		}
	}
	var unknown []string
	for id := range calls {
		if !pending[id] {
			unknown = append(unknown, id)
			fields[CallField(id, "")] = "is not a call of the pending turn"
		}
	}
	if len(fields) > 0 {
		sort.Strings(unknown)
		var said []string
		if len(missing) > 0 {
			said = append(said, "no decision for "+quoteAll(missing))
		}
		if len(unknown) > 0 {
			said = append(said, "the pending turn has no call "+quoteAll(unknown))
		}
		return &Refusal{Code: CodeInvalidInput, Fields: fields,
			Message: fmt.Sprintf("every pending call needs its own decision: %s; its calls are %s", strings.Join(said, "; "), quoteAll(ids))}
	}
	p.choices = make(map[string]callChoice, len(calls))
	approved := 0
	for id, c := range calls {
		p.choices[id] = callChoice{Decision: c.Decision, Reason: c.Reason}
		if c.Decision == DecisionApprove {
			approved++
		}
	}
	req.Calls, req.Decision = calls, kindOf(approved, len(calls)-approved)
	p.approve = req.Decision != DecisionDeny
	return nil
}

// kindOf is the kind of a decision that approves approved calls and
// denies denied ones.
func kindOf(approved, denied int) string {
	switch {
	case denied == 0:
		return DecisionApprove
	case approved == 0:
		return DecisionDeny
	}
	return DecisionMixed
}

// approves reports whether the decision approves the call: every call of
// an approval of the whole turn, the approved ones of a turn decided call
// by call.
func (p *pipeline) approves(callID string) bool {
	if p.choices == nil {
		return p.approve
	}
	return p.choices[callID].Decision == DecisionApprove
}

// callEdits are the edited arguments of the approved calls, by call id.
func callEdits(calls map[string]CallDecision) map[string]json.RawMessage {
	edits := map[string]json.RawMessage{}
	for id, c := range calls {
		if len(c.Arguments) > 0 {
			edits[id] = c.Arguments
		}
	}
	return edits
}

// callEditFields renames the fields of a refused edit from the edit form's
// names (arguments.<call id>…) to where the choices carried the edit
// (calls.<call id>.arguments…). A call id may hold a dot: the longest id
// of the turn that the key starts with is the call.
func (p *pipeline) callEditFields(err error) error {
	r, ok := err.(*Refusal)
	if !ok || r.Fields == nil {
		return err
	}
	ids := make([]string, 0, len(p.state.Pending.Calls))
	for _, c := range p.state.Pending.Calls {
		ids = append(ids, c.ID)
	}
	sort.Slice(ids, func(i, j int) bool { return len(ids[i]) > len(ids[j]) })
	fields := make(map[string]string, len(r.Fields))
	for k, v := range r.Fields {
		if rest, ok := strings.CutPrefix(k, editPrefix); ok {
			for _, id := range ids {
				if rest == id {
					k = CallField(id, "arguments")
					break
				}
				if prop, ok := strings.CutPrefix(rest, id+"."); ok {
					k = CallField(id, "arguments."+prop)
					break
				}
			}
		}
		fields[k] = v
	}
	return &Refusal{Code: r.Code, Fields: fields, Message: "the edited arguments do not fit the tool: " + describeFields(fields)}
}

// recordCalls stores the choices on the decision, for the continuation
// that applies it and for its readers.
func (p *pipeline) recordCalls(d *DecisionRecord) error {
	if p.choices == nil {
		return nil
	}
	b, err := json.Marshal(p.choices)
	if err != nil {
		return fmt.Errorf("runtime: encode the choices of run %d: %w", p.runID, err)
	}
	d.Calls = b
	return nil
}

// approvedTurn is the turn with only the calls the decision approves.
func approvedTurn(turn *PendingTurn, approves func(id string) bool) *PendingTurn {
	t := *turn
	t.Calls = nil
	for _, c := range turn.Calls {
		if approves(c.ID) {
			t.Calls = append(t.Calls, c)
		}
	}
	return &t
}

// CallVerdicts reads the per-call choices a decision stores, by call id:
// nil for a decision of the whole turn.
func (d *DecisionRecord) CallVerdicts() (map[string]CallVerdict, error) {
	if len(d.Calls) == 0 {
		return nil, nil
	}
	var m map[string]callChoice
	if err := json.Unmarshal(d.Calls, &m); err != nil {
		return nil, fmt.Errorf("runtime: decode the choices of run %d: %w", d.RunID, err)
	}
	out := make(map[string]CallVerdict, len(m))
	for id, c := range m {
		out[id] = CallVerdict{Approved: c.Decision == DecisionApprove, Reason: c.Reason}
	}
	return out, nil
}

// CallVerdict is what a decision chose for one call: approved or not, and
// the call's own reason ("" when it took the decision's).
type CallVerdict struct {
	Approved bool
	Reason   string
}

// verdictOf is the decision's choice for a call: its own, or, for a
// decision of the whole turn, the decision's.
func verdictOf(d *DecisionRecord, choices map[string]CallVerdict, callID string) (approved bool, reason string) {
	v, ok := choices[callID]
	if !ok {
		return d.Kind == DecisionApprove, d.Reason
	}
	if v.Reason == "" {
		return v.Approved, d.Reason
	}
	return v.Approved, v.Reason
}

// verdictKind names a call's choice.
func verdictKind(approved bool) string {
	if approved {
		return DecisionApprove
	}
	return DecisionDeny
}
