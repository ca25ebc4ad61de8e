package runtime

import (
	"encoding/json"
	"fmt"
)

// State is what a run carries from one step to the next: the transcript,
// the turn it waits on, and what people decided about its calls. It is
// checkpointed with every step, so a worker can continue from the last one.
type State struct {
	Messages   []Message `json:"messages"`
	Iterations int       `json:"iterations"`
	Usage      Usage     `json:"usage"`
	// Pending is the turn the run waits on; nil while it runs.
	Pending *PendingTurn `json:"pending,omitempty"`
	// Verdicts holds the decision about each call that needed one, by call id.
	Verdicts map[string]Verdict `json:"verdicts,omitempty"`
	// Applied is the digest of the last turn whose decision was applied, so
	// that a continuation resumed by a worker does not apply it twice.
	Applied string `json:"applied,omitempty"`
	// Attempts counts how often a call was re-offered after an interrupted
	// write, so that each re-offer is a new turn with a new digest.
	Attempts map[string]int `json:"attempts,omitempty"`
}

// Verdict is a person's decision about one call.
type Verdict struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
	Reason   string `json:"reason,omitempty"`
	// Input is the typed answer for an input tool.
	Input json.RawMessage `json:"input,omitempty"`
}

// PendingTurn is what a paused run asks a person about. Its canonical JSON
// is hashed into the turn digest.
type PendingTurn struct {
	Kind  string     `json:"kind"` // approval or input
	Calls []ToolCall `json:"calls"`
	// Schema is the JSON Schema an input answer must satisfy.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Note tells the decider something the calls do not, such as an
	// interrupted earlier attempt.
	Note    string `json:"note,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
}

// Pending turn kinds.
const (
	TurnApproval = "approval"
	TurnInput    = "input"
)

// StateCodec turns a State into the stored blob and back. The default is
// plain JSON; an encrypting codec may wrap it.
type StateCodec interface {
	Encode(State) ([]byte, error)
	Decode([]byte) (State, error)
}

// JSONCodec stores the state as plain JSON.
type JSONCodec struct{}

// Encode returns the state's JSON.
func (JSONCodec) Encode(s State) ([]byte, error) { return json.Marshal(s) }

// Decode parses a state's JSON; a blob that does not parse is an error.
func (JSONCodec) Decode(b []byte) (State, error) {
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("runtime: decode state: %w", err)
	}
	return s, nil
}
