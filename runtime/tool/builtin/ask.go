package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
)

const askOperatorParams = `{
  "type": "object",
  "properties": {
    "question": {"type": "string", "minLength": 1, "description": "What the operator should answer."}
  },
  "required": ["question"],
  "additionalProperties": false
}`

// askOperatorAsks is the schema of the operator's answer; the inbox renders
// one form field per property, titled after it.
const askOperatorAsks = `{
  "type": "object",
  "properties": {
    "amount": {"type": "integer", "minimum": 1, "title": "Amount (cents)"},
    "note": {"type": "string", "maxLength": 500, "title": "Note"}
  },
  "required": ["amount"],
  "additionalProperties": false
}`

// ErrNeedsPerson is what an input tool's Call returns: its result is a
// person's answer, which the engine collects by pausing the run.
var ErrNeedsPerson = errors.New("needs a person to answer")

// AskOperator is the ask_operator tool, an input tool: the run pauses and an
// operator answers with an amount in cents and an optional note, and that
// answer is the tool's result.
type AskOperator struct{}

// Spec describes ask_operator: read-only, arguments {"question": string},
// and Asks, the schema of the answer ({"amount": integer >= 1, "note":
// string}).
func (AskOperator) Spec() runtime.ToolSpec {
	return runtime.ToolSpec{
		Name:        NameAskOperator,
		Description: "Ask a human operator a question; the run waits for the answer (an amount in cents and a note).",
		Parameters:  json.RawMessage(askOperatorParams),
		Effect:      runtime.ReadOnly,
		Asks:        json.RawMessage(askOperatorAsks),
	}
}

// Call never answers: the engine pauses the run for a person instead of
// calling an input tool. It returns the argument error for invalid
// arguments and an error wrapping ErrNeedsPerson otherwise.
func (AskOperator) Call(ctx context.Context, inv runtime.Invocation) (string, error) {
	var args struct {
		Question string `json:"question"`
	}
	if err := decodeArgs(NameAskOperator, inv.Arguments, &args); err != nil {
		return "", err
	}
	if args.Question == "" {
		return "", fmt.Errorf("%s: invalid arguments: question is required", NameAskOperator)
	}
	return "", fmt.Errorf("%s: %w; the run must pause for input instead of calling it", NameAskOperator, ErrNeedsPerson)
}
