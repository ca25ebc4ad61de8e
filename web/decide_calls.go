package web

import (
	"net/url"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// One decision per call, on the inbox card. A turn of two or more calls
// has, inside the form that decides it, one fieldset per call: approve or
// deny (radios named calls.<call id>.decision) and a reason of its own
// (calls.<call id>.reason), the names the pipeline's refusals give their
// fields (runtime.CallField). The card's buttons say what happens to a
// call left open: "Approve the rest" and "Deny the rest" decide each of
// them so, and the chosen calls as chosen; "Decide each call" decides only
// as chosen, and every call needs its choice (else 422, the card shown
// again with what was chosen). A form with no choice and no per-call
// reason is an approval or a denial of the whole turn, as before.

// decidePerCall is the value of the button that decides only as chosen.
const decidePerCall = "calls"

// callsForm reads the per-call fields of a posted decision form against
// the button that sent it (decision): the choices for
// runtime.DecideRequest.Calls, the decision of the calls left open
// (Rest), and the decision of the whole turn, left out beside choices.
// A form that decides the whole turn has nil choices and its decision.
func callsForm(f url.Values, decision string) (calls map[string]runtime.CallDecision, rest, whole string) {
	choices := map[string]runtime.CallDecision{}
	for k, vs := range f {
		rest, ok := strings.CutPrefix(k, callsPrefix)
		if !ok || len(vs) == 0 || vs[0] == "" {
			continue
		}
		if id, ok := strings.CutSuffix(rest, ".decision"); ok {
			c := choices[id]
			c.Decision = vs[0]
			choices[id] = c
		} else if id, ok := strings.CutSuffix(rest, ".reason"); ok {
			c := choices[id]
			c.Reason = vs[0]
			choices[id] = c
		}
	}
	switch {
	case decision == decidePerCall:
		// Only the calls chosen: one left open is missing, and refused
		// as such.
		for id, c := range choices {
			if c.Decision == "" {
				delete(choices, id)
			}
		}
		return choices, "", ""
	case len(choices) == 0:
		return nil, "", decision
	}
	for id, c := range choices {
		if c.Decision == "" {
			// A reason typed for a call left open: the call takes the
			// button's decision, with its reason.
			c.Decision = decision
			choices[id] = c
		}
	}
	return choices, decision, ""
}

// callsPrefix starts the names of a card's per-call fields.
const callsPrefix = "calls."

// callChoice is a call's fieldset on the card: what a refused form chose
// for it, and the pipeline's message about it.
func callChoice(callID string, refused *formState) *templates.CallChoice {
	ch := &templates.CallChoice{}
	if refused == nil {
		return ch
	}
	ch.Decision = url.Values(refused.values).Get(runtime.CallField(callID, "decision"))
	ch.Reason = url.Values(refused.values).Get(runtime.CallField(callID, "reason"))
	ch.Error = refused.fields[runtime.CallField(callID, "")]
	if e := refused.fields[runtime.CallField(callID, "decision")]; e != "" {
		ch.Error = e
	}
	return ch
}

// choiceField reports whether a refusal's field is about a call's choice.
func choiceField(turn runtime.PendingTurn, key string) bool {
	for _, c := range turn.Calls {
		if key == runtime.CallField(c.ID, "") || strings.HasPrefix(key, runtime.CallField(c.ID, "")+".") {
			return true
		}
	}
	return false
}
