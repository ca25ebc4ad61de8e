package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestEditOfAnMCPCall: an edit of a call of a tool the configuration's
// MCP server brings is checked against that server's schema before
// anything is claimed, and the server's tool runs with it.
func TestEditOfAnMCPCall(t *testing.T) {
	f := newFixture(t, directYAML)
	paused := f.start(t, "direct")
	waitingOn(t, paused, "srv__charge")
	id := paused.Pending.Calls[0].ID
	ctx := context.Background()

	before := f.State(t, paused.RunID)
	_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.Actor("approver"),
		Arguments: map[string]json.RawMessage{id: json.RawMessage(`{"order_id":"A-1","amount_cents":"lots"}`)}})
	var ref *runtime.Refusal
	if r, ok := err.(*runtime.Refusal); ok {
		ref = r
	}
	if ref == nil || ref.Code != runtime.CodeInvalidInput || ref.Fields["arguments."+id+".amount_cents"] == "" {
		t.Fatalf("an amount that is text: %v (fields %v), want invalid_input on the amount", err, ref)
	}
	f.Unchanged(t, paused.RunID, before)
	if got := f.shop.charges.Load(); got != 0 {
		t.Errorf("charges after a refused edit = %d, want 0", got)
	}

	out := f.Decide(t, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Arguments: map[string]json.RawMessage{id: json.RawMessage(`{"order_id":"A-1","amount_cents":900}`)}})
	completed(t, out)
	if res := f.results(t, out.RunID); len(res) != 2 || res[1].Content != "charged A-1 900 cents (charge #1)" {
		t.Errorf("tool results = %+v, want the charge of the edited 900 cents", res)
	}
}
