package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// State is what a run carries from one step to the next: the transcript,
// the turn it waits on, and what people decided about its calls. It is
// checkpointed with every step, so a worker can continue from the last one.
// The transcript is stored apart, one row per message, so that a step
// writes only its new messages rather than the whole transcript again.
type State struct {
	Messages   []Message `json:"-"`
	Iterations int       `json:"iterations"`
	// FirstRound is Iterations when the conversation's current turn
	// started: max_iterations bounds the rounds of one turn.
	FirstRound int   `json:"first_round,omitempty"`
	Usage      Usage `json:"usage"`
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
	// Said is what the model wrote with the calls the run waits on, for
	// the people who may read the run; not part of the turn's digest.
	Said string `json:"said,omitempty"`
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
	// ConversationTurn is the conversation's turn the pause belongs to,
	// from turn 2 on (turn 1's digests are what they were before turns).
	ConversationTurn int `json:"conversation_turn,omitempty"`
	// Standing names, by call id, what an approval for the whole run
	// covers when it is not the call's own tool: the tool a meta-tool's
	// execute calls (see StandingNamer), for the arguments as offered. An
	// approval that edits a call stands for what the edit runs instead
	// (see standingNames).
	Standing map[string]string `json:"standing,omitempty"`
	// Previews say, by call id, what a call would do, in the words of its
	// tool (see Previewer); part of what the decider saw.
	Previews map[string]string `json:"previews,omitempty"`
	// Escalated names the grant whose holders alone may decide the turn:
	// it was re-offered to them when nobody decided it in time. Part of
	// the digest, so the forms rendered before the escalation are stale.
	Escalated string `json:"escalated,omitempty"`
	// ApprovalsRequired is how many distinct people must approve the turn
	// (votes); 0 and 1 both mean one. Part of the digest.
	ApprovalsRequired int `json:"approvals_required,omitempty"`
}

// ToolNames are the tools the turn's calls name, each once, in order.
func (t *PendingTurn) ToolNames() []string {
	var names []string
	for _, c := range t.Calls {
		if !slices.Contains(names, c.Name) {
			names = append(names, c.Name)
		}
	}
	return names
}

// StandingName is what a standing approval of a call of this turn covers
// when the call runs with the arguments it was offered with.
func (t *PendingTurn) StandingName(call ToolCall) string {
	if n, ok := t.Standing[call.ID]; ok {
		return n
	}
	return call.Name
}

// Pending turn kinds.
const (
	TurnApproval = "approval"
	TurnInput    = "input"
)

// Sealer protects run content at rest: the suspended state, every
// transcript message and every other stored copy of run content pass
// through it on their way to the store, each with the place it is stored
// at (see Place). The default stores plain JSON; an encrypting sealer may
// replace it, and binds what it seals to its place. Open fails on a blob
// it cannot read: wrapping ErrKeyMissing when the blob was sealed under a
// key it lacks, ErrNotSealed when it requires sealed content and finds
// plain, any other error when the blob is corrupt or was sealed for
// another place.
type Sealer interface {
	Seal(plain []byte, at Place) ([]byte, error)
	Open(sealed []byte, at Place) ([]byte, error)
}

// Plain stores content as it is.
type Plain struct{}

// Seal returns plain unchanged.
func (Plain) Seal(plain []byte, _ Place) ([]byte, error) { return plain, nil }

// sealedPrefixes start the blobs the seal package writes, one per version
// of its format. A process without keys must not take such a blob for a
// corrupt one: it was only sealed under a key this process lacks.
var sealedPrefixes = [][]byte{[]byte("tse2:"), []byte("tse1:")}

// isSealed reports whether a blob is sealed content (of any version).
func isSealed(b []byte) bool {
	for _, p := range sealedPrefixes {
		if bytes.HasPrefix(b, p) {
			return true
		}
	}
	return false
}

// Open returns sealed unchanged, or fails with ErrKeyMissing for a blob an
// encrypting sealer wrote.
func (Plain) Open(sealed []byte, at Place) ([]byte, error) {
	if isSealed(sealed) {
		return nil, fmt.Errorf("runtime: %s: no state keys are configured: %w", at, ErrKeyMissing)
	}
	return sealed, nil
}

func (e *Engine) encodeState(runID int64, s State) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("runtime: encode state: %w", err)
	}
	return e.sealer.Seal(b, RunPlace("state", runID))
}

func (e *Engine) decodeState(runID int64, blob []byte) (State, error) {
	var s State
	b, err := e.sealer.Open(blob, RunPlace("state", runID))
	if err != nil {
		return State{}, fmt.Errorf("runtime: open state: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, fmt.Errorf("runtime: decode state: %w", err)
	}
	return s, nil
}

// encodeMessages seals transcript messages stored from index first on.
func (e *Engine) encodeMessages(runID int64, first int, msgs []Message) ([][]byte, error) {
	out := make([][]byte, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("runtime: encode message: %w", err)
		}
		if out[i], err = e.sealer.Seal(b, MessagePlace(runID, first+i)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// decodeMessages opens a run's whole transcript, stored from index 0 on:
// a message deleted from the middle makes every one after it fail to
// open, as each is bound to its index.
func (e *Engine) decodeMessages(runID int64, blobs [][]byte) ([]Message, error) {
	out := make([]Message, len(blobs))
	for i, blob := range blobs {
		b, err := e.sealer.Open(blob, MessagePlace(runID, i))
		if err != nil {
			return nil, fmt.Errorf("runtime: open message %d: %w", i, err)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("runtime: decode message %d: %w", i, err)
		}
	}
	return out, nil
}
