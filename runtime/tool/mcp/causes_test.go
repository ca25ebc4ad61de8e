package mcp_test

import (
	"context"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestServerDownIsRecordedOnTheRun: a server that cannot be reached when a
// run starts is not only a log line: the run records an "unavailable"
// event naming the server and the cause, and every call of one of its
// tools gets that cause as its result.
func TestServerDownIsRecordedOnTheRun(t *testing.T) {
	f := newFixture(t, directYAML)
	f.shop.ts.Close()
	var steps []runtime.Step
	c, err := f.Engine.Start(context.Background(), runtime.StartRequest{Configuration: "direct",
		Prompt: "Charge order A-1", Owner: f.Actor("owner"), Origin: runtime.OriginInteractive})
	if err != nil {
		t.Fatal(err)
	}
	out := c.Run(context.Background(), runtime.ObserverFunc(func(s runtime.Step) { steps = append(steps, s) }))
	completed(t, out)

	if len(steps) == 0 || steps[0].Kind != runtime.KindUnavailable {
		t.Fatalf("first step = %+v, want the unavailable event", steps)
	}
	if p := string(steps[0].Payload); !strings.Contains(p, `"source":"mcp server srv"`) ||
		!strings.Contains(p, `"tools":"srv__*"`) || !strings.Contains(p, "connection refused") {
		t.Errorf("unavailable event = %s, want the server, its tools and the cause", p)
	}
	evs, err := f.Store.Events(context.Background(), out.RunID, 0)
	if err != nil || len(evs) < 2 || evs[1].Kind != runtime.KindUnavailable {
		t.Fatalf("stored events = %+v, %v; want the unavailable event first after the turn's start", evs, err)
	}
	res := f.results(t, out.RunID)
	if len(res) != 2 {
		t.Fatalf("tool results = %+v, want two", res)
	}
	for _, r := range res {
		if !r.IsError || !strings.Contains(r.Content, "is not available: mcp server srv: cannot connect to") ||
			!strings.Contains(r.Content, "connection refused") {
			t.Errorf("result of %s = %q, want the cause", r.ToolName, r.Content)
		}
	}
}

// TestUnsetVariableIsTheCause: a server whose ${NAME} is unset names the
// variable, on the run and in the result of its tools' calls, and no
// request is sent.
func TestUnsetVariableIsTheCause(t *testing.T) {
	const y = `
identifier: unset
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: srv__lookup
            arguments: {order_id: A-1}
      - text: "Looked."
mcp_servers:
  - name: srv
    url: ${MCP_URL}
    headers:
      Authorization: Bearer ${NOT_SET_ANYWHERE}
    requires_approval: false
`
	f := newFixture(t, y)
	out := f.start(t, "unset")
	completed(t, out)
	res := f.results(t, out.RunID)
	if len(res) != 1 || !strings.Contains(res[0].Content, "environment variable NOT_SET_ANYWHERE is unset") {
		t.Errorf("tool results = %+v, want the unset variable named", res)
	}
	if got := f.shop.lookups.Load(); got != 0 {
		t.Errorf("lookups = %d, want 0", got)
	}
}

// TestSessionApprovalOfExecuteCoversOnlyItsTool: approving the
// meta-tool's execute for the whole run releases the tool that execute
// called, not every tool behind it: a later execute of another tool waits
// for its own approval, and one of the same tool does not.
func TestSessionApprovalOfExecuteCoversOnlyItsTool(t *testing.T) {
	const y = `
identifier: meta-session
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
            arguments: {name: void, arguments: {order_id: A-1}}
      - text: "Done."
mcp_servers:
  - name: srv
    url: ${MCP_URL}
    meta_tool: true
`
	f := newFixture(t, y)
	paused := f.start(t, "meta-session")
	waitingOn(t, paused, "srv__execute")
	if got := paused.Pending.StandingName(paused.Pending.Calls[0]); got != "srv__charge" {
		t.Fatalf("the turn's standing name = %q, want srv__charge", got)
	}
	c, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Scope: runtime.ScopeSession, Actor: f.Actor("approver")})
	if err != nil {
		t.Fatal(err)
	}
	out := c.Run(context.Background(), nil)
	// The second charge ran without a pause; the void waits.
	waitingOn(t, out, "srv__execute")
	if got := f.shop.charges.Load(); got != 2 {
		t.Errorf("charges = %d, want 2 (the second covered by the standing approval)", got)
	}
	if !strings.Contains(string(out.Pending.Calls[0].Arguments), `"void"`) {
		t.Errorf("the run waits on %s, want the void", out.Pending.Calls[0].Arguments)
	}
}
