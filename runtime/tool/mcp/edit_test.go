package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
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

// editedSessionYAML proposes a charge through the meta-tool's execute
// three times over: the first is edited into a lookup and approved for
// the rest of the run.
const editedSessionYAML = `
identifier: meta-edited
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: srv__execute
            arguments: {name: charge, arguments: {order_id: A-1, amount_cents: 100}}
      - tool_calls:
          - name: srv__execute
            arguments: {name: charge, arguments: {order_id: A-1, amount_cents: 200}}
      - tool_calls:
          - name: srv__execute
            arguments: {name: lookup, arguments: {order_id: A-1}}
      - text: "Done."
mcp_servers:
  - name: srv
    url: ${MCP_URL}
    meta_tool: true
`

// TestSessionApprovalOfAnEditedExecuteStandsForTheEditedTool: the model
// proposes execute charge, the approver edits it into execute lookup and
// approves it for the rest of the run. What stands is lookup, the tool that
// ran: the model's next execute charge waits for its own approval, and a
// later execute lookup does not. The same whoever carries the decision
// out: the request, a worker on the durable path, or a worker recovering
// the request's claim after its holder died before the first step.
func TestSessionApprovalOfAnEditedExecuteStandsForTheEditedTool(t *testing.T) {
	for _, path := range []string{"request", "durable", "recovered"} {
		t.Run(path, func(t *testing.T) {
			f := newFixture(t, editedSessionYAML)
			ctx := context.Background()
			paused := f.start(t, "meta-edited")
			waitingOn(t, paused, "srv__execute")
			if got := paused.Pending.StandingName(paused.Pending.Calls[0]); got != "srv__charge" {
				t.Fatalf("the turn's standing name = %q, want srv__charge (as proposed)", got)
			}
			req := runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
				Decision: runtime.DecisionApprove, Scope: runtime.ScopeSession, Actor: f.Actor("approver"),
				Arguments: map[string]json.RawMessage{paused.Pending.Calls[0].ID: json.RawMessage(
					`{"name":"lookup","arguments":{"order_id":"A-1"}}`)}}
			if path == "durable" {
				req.Path = runtime.PathDurable
			}
			c, err := f.Engine.Decide(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			switch path {
			case "request":
				if out := c.Run(ctx, nil); out.Err != nil {
					t.Fatalf("continuation: %v", out.Err)
				}
			case "recovered":
				// The continuation is never run: its holder died, and its
				// lease runs out.
				if _, err := f.DB.Exec(`UPDATE runs SET lease_expires_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, paused.RunID); err != nil {
					t.Fatal(err)
				}
				fallthrough
			case "durable":
				testrig.Work(t, f.NewEngine(runtime.Options{Source: f.src}), 1, 20*time.Millisecond)
			}
			run := f.WaitRun(t, paused.RunID, 10*time.Second, "it waits again or settles", func(r *runtime.Run) bool {
				return r.Status.Waiting() || r.Status.Terminal()
			})
			if got := f.shop.lookups.Load(); got != 1 {
				t.Errorf("lookups = %d, want 1: the edited call", got)
			}
			if got := f.shop.charges.Load(); got != 0 {
				t.Errorf("charges = %d, want 0: the second charge ran on the approval of the lookup it was edited into", got)
			}
			var standing []string
			if err := f.DB.Select(&standing, `SELECT tool_name FROM standing_approvals WHERE run_id = ? ORDER BY tool_name`, paused.RunID); err != nil {
				t.Fatal(err)
			}
			if len(standing) != 1 || standing[0] != "srv__lookup" {
				t.Errorf("standing approvals = %q, want [srv__lookup]: the tool that ran", standing)
			}
			if run.Status != runtime.StatusWaitingForApproval {
				t.Fatalf("run is %s, want waiting for the approval of the second charge", run.Status)
			}
			again, err := f.Engine.PendingOne(ctx, paused.RunID, f.Actor("approver"))
			if err != nil {
				t.Fatal(err)
			}
			var waits []string
			for _, c := range again.Turn.Calls {
				waits = append(waits, c.Name+" "+string(c.Arguments))
			}
			if len(waits) != 1 || !strings.Contains(waits[0], `"charge"`) {
				t.Fatalf("the run waits on %q, want the second execute charge", waits)
			}

			// Approved once, the charge runs; the lookup after it stands
			// approved, and runs with no pause.
			out := f.Approve(t, runtime.Outcome{RunID: paused.RunID, Digest: again.Run.TurnDigest})
			completed(t, out)
			if got := f.shop.charges.Load(); got != 1 {
				t.Errorf("charges = %d, want 1", got)
			}
			if got := f.shop.lookups.Load(); got != 2 {
				t.Errorf("lookups = %d, want 2: the later execute lookup ran on the standing approval", got)
			}
		})
	}
}
