package runtime

import (
	"context"
	"encoding/json"
)

// Effect says what a tool does to the world, which decides whether it needs
// an approval and whether an interrupted call may be repeated.
type Effect string

// The three effects.
const (
	ReadOnly           Effect = "read_only"
	IdempotentWrite    Effect = "idempotent_write"
	NonIdempotentWrite Effect = "non_idempotent_write"
)

// ToolSpec describes a tool to the model and to the engine.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Effect      Effect          `json:"effect"`
	// Asks, when set, makes this an input tool: the run pauses and a person
	// answers with a value that satisfies this JSON Schema; the answer is the
	// tool's result.
	Asks json.RawMessage `json:"asks,omitempty"`
	// RequiresApproval, when set, is the tool's own approval default (an
	// MCP server's setting, say); a configuration's tool policy still wins.
	// When unset, writes need an approval and reads do not.
	RequiresApproval *bool `json:"requires_approval,omitempty"`
}

// ToolSource brings tools a configuration names beyond the built-in ones,
// such as an MCP server's. Tools is called when a continuation starts. An
// error is logged, and the tools returned with it are still offered (a
// source of several servers returns those it reached); a call of a missing
// tool becomes an error result the model sees.
type ToolSource interface {
	Tools(ctx context.Context, cfg *Configuration) ([]Tool, error)
}

// UnavailableError is how a ToolSource says that some of a configuration's
// tools could not be brought: every tool whose name starts with Prefix is
// missing, for the reason Cause gives. The continuation records it as an
// event on the run and answers a call of such a tool with it, so the
// cause is never only in a log. Cause is read by people and by the model:
// it names no secret. A source returns one per failed part, joined with
// errors.Join.
type UnavailableError struct {
	Source string // what failed, e.g. "mcp server billing"
	Prefix string // the prefix of the names of the tools it would have brought
	Cause  string
}

func (e *UnavailableError) Error() string { return e.Source + ": " + e.Cause }

// Previewer is implemented by a tool that can say what a call would do,
// without doing any of it: one line for the person who decides ("Refund
// 49.90 EUR of ORD-1001 to Alice Example"). The engine asks when a run
// pauses on the call; an error is shown instead of the line.
type Previewer interface {
	Preview(ctx context.Context, inv Invocation) (string, error)
}

// StandingNamer is implemented by a tool that calls other tools (an MCP
// meta-tool's execute). A standing approval (scope=session) of one of its
// calls covers the tool the call names, never the calling tool itself, so
// approving one execute does not release every tool behind it. It is asked
// for the arguments the call runs with: an approval's edited ones, when it
// edited the call.
type StandingNamer interface {
	StandingName(arguments json.RawMessage) string
}

// Tool is something a run can call.
type Tool interface {
	Spec() ToolSpec
	// Call runs the tool. A returned error becomes a tool result the model
	// sees (marked as an error); it never fails the run.
	Call(ctx context.Context, inv Invocation) (string, error)
}

// Invocation is one call of a tool, executed as the run's owner.
type Invocation struct {
	RunID     int64
	OwnerID   int64
	CallID    string
	Arguments json.RawMessage
}
