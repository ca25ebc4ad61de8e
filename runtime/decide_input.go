package runtime

import (
	"context"
	"encoding/json"
	"errors"
)

// InputRequest is a person's answer to an input turn.
type InputRequest struct {
	RunID  int64
	Digest string
	Input  json.RawMessage
	// Form, when not nil, is the answer as a page posted it, values by
	// field name: it is read by the pending turn's schema in place of
	// Input, at the pipeline's validation step, after the checks before
	// it; a field that does not even parse (text where a number belongs)
	// is refused with the schema's own messages. Fields the schema does
	// not name (turn_digest, csrf_token) are ignored.
	Form  map[string][]string
	Actor Actor
	Path  string
	Inbox bool
}

// SubmitInput runs the decision pipeline for an answer to an input turn;
// see Decide. An answer that fails the schema is refused with
// invalid_input and a message per field.
func (e *Engine) SubmitInput(ctx context.Context, req InputRequest) (*Continuation, error) {
	p := pipeline{e: e, runID: req.RunID, digest: req.Digest, actor: req.Actor, path: req.Path,
		inbox: req.Inbox, waitFor: StatusWaitingForInput}
	if err := p.check(ctx); err != nil {
		return nil, err
	}
	raw, formErrors := req.Input, map[string]string(nil)
	if req.Form != nil {
		raw, formErrors = e.validator.FromForm(p.state.Pending.Schema, req.Form)
	}
	// What is checked is what is stored and what the model reads: the
	// answer read strictly and written again, never the bytes as sent.
	input, err := NormalizeJSON(raw)
	var bad *JSONError
	if errors.As(err, &bad) {
		field := ""
		if len(bad.Path) > 0 {
			field = bad.Path[0]
		}
		return nil, &Refusal{Code: CodeInvalidInput, Message: "the answer does not fit the form: " + bad.Error(),
			Fields: map[string]string{field: bad.Problem}}
	}
	if err != nil {
		return nil, &Refusal{Code: CodeInvalidInput, Message: "the answer is not valid JSON",
			Fields: map[string]string{"": err.Error()}}
	}
	fields, err := e.validator.Errors(p.state.Pending.Schema, input)
	if err != nil {
		return nil, &Refusal{Code: CodeInvalidInput, Message: "the answer is not valid JSON",
			Fields: map[string]string{"": err.Error()}}
	}
	for k, v := range formErrors {
		if fields == nil {
			fields = map[string]string{}
		}
		fields[k] = v
	}
	if fields != nil {
		return nil, &Refusal{Code: CodeInvalidInput, Message: "the answer does not fit the form", Fields: fields}
	}
	return p.claim(ctx, DecisionRecord{Kind: DecisionInput, Scope: ScopeOnce, Input: input}, nil)
}
