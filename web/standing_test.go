package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp"
)

// editedSessionYAML proposes a charge through an MCP meta-tool's execute,
// then another, then a lookup: the first is edited into a lookup and
// approved for the rest of the run.
const editedSessionYAML = `
identifier: meta-edited
name: Meta edited
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: srv__execute, arguments: {name: charge, arguments: {order_id: "${order_id}", amount_cents: 100}}}]
      - tool_calls: [{name: srv__execute, arguments: {name: charge, arguments: {order_id: "${order_id}", amount_cents: 200}}}]
      - tool_calls: [{name: srv__execute, arguments: {name: lookup, arguments: {order_id: "${order_id}"}}}]
      - text: "done"
mcp_servers:
  - name: srv
    url: ${MCP_URL}
    meta_tool: true
`

// till is a real MCP server over streamable HTTP whose lookup reads and
// whose charge writes; each counts its calls.
type till struct {
	lookups, charges atomic.Int32
}

type tillArgs struct {
	OrderID     string `json:"order_id"`
	AmountCents int    `json:"amount_cents,omitempty"`
}

// newTillApp serves the web layer with an engine that brings the tools of
// a till (as a meta_tool server) and runs editedSessionYAML.
func newTillApp(t *testing.T) (*testApp, *till) {
	t.Helper()
	tl := &till{}
	server := sdk.NewServer(&sdk.Implementation{Name: "till", Version: "1"}, nil)
	result := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}
	sdk.AddTool(server, &sdk.Tool{Name: "lookup", Description: "Looks an order up.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *sdk.CallToolRequest, tillArgs) (*sdk.CallToolResult, any, error) {
			tl.lookups.Add(1)
			return result, nil, nil
		})
	sdk.AddTool(server, &sdk.Tool{Name: "charge", Description: "Charges an order's card."},
		func(context.Context, *sdk.CallToolRequest, tillArgs) (*sdk.CallToolResult, any, error) {
			tl.charges.Add(1)
			return result, nil, nil
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	t.Cleanup(ts.Close)
	src := mcp.NewSource(mcp.Options{Getenv: func(name string) string {
		if name == "MCP_URL" {
			return ts.URL
		}
		return ""
	}})
	t.Cleanup(func() { src.Close() })
	return newAppWith(t, 0, appEngine{src: src, configs: []string{editedSessionYAML}}), tl
}

// editedIntoLookup is the edit of the first execute charge into a lookup.
func editedIntoLookup(order string) string {
	return `{"name":"lookup","arguments":{"order_id":"` + order + `"}}`
}

// pausesAgainOnTheCharge checks a run after its execute charge was edited
// into a lookup and approved for the rest of the run: the lookup ran, the
// model's second execute charge waits for its own approval, and what
// stands is lookup. Approved once, the charge runs, and the later execute
// lookup runs on the standing approval, with no pause.
func (a *testApp) pausesAgainOnTheCharge(t *testing.T, tl *till, id int64) {
	t.Helper()
	run := a.Run(t, id)
	if got := tl.lookups.Load(); got != 1 {
		t.Errorf("lookups = %d, want 1: the edited call", got)
	}
	if got := tl.charges.Load(); got != 0 {
		t.Errorf("charges = %d, want 0: the second charge ran on the approval of the lookup it was edited into", got)
	}
	var standing []string
	if err := a.DB.Select(&standing, `SELECT tool_name FROM standing_approvals WHERE run_id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if len(standing) != 1 || standing[0] != "srv__lookup" {
		t.Errorf("standing approvals = %q, want [srv__lookup]", standing)
	}
	if run.Status != runtime.StatusWaitingForApproval {
		t.Fatalf("run is %s, want waiting for the approval of the second charge", run.Status)
	}
	again, err := a.Engine.PendingOne(context.Background(), id, a.Actor("approver"))
	if err != nil {
		t.Fatal(err)
	}
	var waits []string
	for _, c := range again.Turn.Calls {
		waits = append(waits, c.Name+" "+string(c.Arguments))
	}
	if len(waits) != 1 || !strings.Contains(waits[0], `"amount_cents":200`) {
		t.Fatalf("the run waits on %q, want the second execute charge", waits)
	}
	out := a.Approve(t, runtime.Outcome{RunID: id, Digest: run.TurnDigest})
	if out.Status != runtime.StatusCompleted {
		t.Fatalf("after the charge's approval the run is %s, want completed", out.Status)
	}
	if got, want := [2]int32{tl.charges.Load(), tl.lookups.Load()}, [2]int32{1, 2}; got != want {
		t.Errorf("charges, lookups = %d, want %d: the later lookup ran on the standing approval", got, want)
	}
}

// TestInboxEditedSessionApprovalStandsForTheEditedTool: the inbox's
// "Edit and approve" form, with scope=session, of an execute charge
// edited into a lookup.
func TestInboxEditedSessionApprovalStandsForTheEditedTool(t *testing.T) {
	a, tl := newTillApp(t)
	paused, order := a.Waiting(t, "meta-edited")
	id := paused.Pending.Calls[0].ID
	c := a.signIn(t, "approver")
	res, _ := c.post(inboxPath(paused.RunID, "decision"), url.Values{"turn_digest": {paused.Digest},
		"decision": {"approve"}, "scope": {"session"}, "edit": {id}, "arguments." + id: {editedIntoLookup(order)}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d, want 303", res.StatusCode)
	}
	a.pausesAgainOnTheCharge(t, tl, paused.RunID)
}

// TestAPIEditedSessionApprovalStandsForTheEditedTool: the same through
// POST /api/runs/:id/decisions with "arguments".
func TestAPIEditedSessionApprovalStandsForTheEditedTool(t *testing.T) {
	a, tl := newTillApp(t)
	paused, order := a.Waiting(t, "meta-edited")
	id := paused.Pending.Calls[0].ID
	body := `{"turn_digest":"` + paused.Digest + `","decision":"approve","scope":"session","arguments":{"` + id + `":` + editedIntoLookup(order) + `}}`
	out := a.bearer(t, "approver", runtime.ScopeRunDecide).call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"), body, nil)
	out.wantKeys(t, http.StatusOK, "outcome")
	a.pausesAgainOnTheCharge(t, tl, paused.RunID)
}
