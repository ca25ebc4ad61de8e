package mcp_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

const directYAML = `
identifier: direct
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: srv__lookup
            arguments: {order_id: "${order_id}"}
      - tool_calls:
          - name: srv__charge
            arguments: {order_id: "${order_id}", amount_cents: 500}
      - text: "Charged."
mcp_servers:
  - name: srv
    url: ${MCP_URL}
    headers:
      Authorization: Bearer ${MCP_TOKEN}
tool_policies:
  srv__lookup: {requires_approval: false}
`

const metaYAML = `
identifier: meta
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: srv__discover
            arguments: {query: "CHARGE"}
          - name: srv__describe_tool
            arguments: {name: charge}
      - tool_calls:
          - name: srv__execute
            arguments: {name: charge, arguments: {order_id: "${order_id}", amount_cents: 700}}
      - text: "Charged."
mcp_servers:
  - name: srv
    url: ${MCP_URL}
    meta_tool: true
`

func TestReadRunsAndWriteWaitsForApproval(t *testing.T) {
	f := newFixture(t, directYAML)
	paused := f.start(t, "direct")
	waitingOn(t, paused, "srv__charge")
	if got := f.shop.lookups.Load(); got != 1 {
		t.Errorf("lookups before the approval = %d, want 1", got)
	}
	if got := f.shop.charges.Load(); got != 0 {
		t.Errorf("charges before the approval = %d, want 0", got)
	}

	out := f.Approve(t, paused)
	completed(t, out)
	if out.Answer != "Charged." {
		t.Errorf("answer = %q, want Charged.", out.Answer)
	}
	if got := f.shop.charges.Load(); got != 1 {
		t.Errorf("charges = %d, want exactly 1", got)
	}
	if got := f.shop.lookups.Load(); got != 1 {
		t.Errorf("lookups = %d, want exactly 1", got)
	}
	res := f.results(t, out.RunID)
	if len(res) != 2 || res[0].ToolName != "srv__lookup" || res[0].IsError ||
		!strings.Contains(res[0].Content, "order A-1: open") ||
		res[1].ToolName != "srv__charge" || res[1].IsError || res[1].Content != "charged A-1 500 cents (charge #1)" {
		t.Errorf("tool results = %+v, want lookup's and charge's", res)
	}
	for i, got := range f.shop.headers() {
		if got != "Bearer "+token {
			t.Errorf("request %d carried Authorization %q, want the interpolated token", i, got)
		}
	}
	if len(f.shop.headers()) == 0 {
		t.Error("the MCP server saw no request")
	}
}

func TestMetaToolWaitsForApprovalOfExecute(t *testing.T) {
	f := newFixture(t, metaYAML)
	paused := f.start(t, "meta")
	waitingOn(t, paused, "srv__execute")
	if got := f.shop.charges.Load(); got != 0 {
		t.Errorf("charges before the approval = %d, want 0", got)
	}

	out := f.Approve(t, paused)
	completed(t, out)
	if got := f.shop.charges.Load(); got != 1 {
		t.Errorf("charges = %d, want exactly 1", got)
	}
	res := f.results(t, out.RunID)
	if len(res) != 3 {
		t.Fatalf("tool results = %+v, want discover's, describe_tool's and execute's", res)
	}
	var found struct {
		Tools []struct{ Name, Description, Effect string }
	}
	if err := json.Unmarshal([]byte(res[0].Content), &found); err != nil {
		t.Fatalf("discover's result %q: %v", res[0].Content, err)
	}
	if len(found.Tools) != 1 || found.Tools[0].Name != "charge" || found.Tools[0].Effect != "non_idempotent_write" {
		t.Errorf("discover(CHARGE) = %+v, want charge alone", found.Tools)
	}
	var described struct {
		Name      string
		Arguments map[string]any `json:"arguments_schema"`
	}
	if err := json.Unmarshal([]byte(res[1].Content), &described); err != nil {
		t.Fatalf("describe_tool's result %q: %v", res[1].Content, err)
	}
	if props, _ := described.Arguments["properties"].(map[string]any); described.Name != "charge" || props["amount_cents"] == nil {
		t.Errorf("describe_tool(charge) = %s, want charge's schema", res[1].Content)
	}
	if res[2].ToolName != "srv__execute" || res[2].IsError || res[2].Content != "charged A-1 700 cents (charge #1)" {
		t.Errorf("execute's result = %+v, want the charge", res[2])
	}
}

func TestServerGoneIsAResultTheModelSees(t *testing.T) {
	f := newFixture(t, metaYAML, directYAML)

	meta := f.start(t, "meta")
	waitingOn(t, meta, "srv__execute")
	direct := f.start(t, "direct")
	waitingOn(t, direct, "srv__charge")
	f.shop.ts.Close()

	// The meta-tool is offered without the server: execute fails in
	// transport.
	out := f.Approve(t, meta)
	completed(t, out)
	res := f.results(t, out.RunID)
	last := res[len(res)-1]
	if last.ToolName != "srv__execute" || !last.IsError || !strings.HasPrefix(last.Content, "error: mcp tool charge: ") {
		t.Errorf("execute's result = %+v, want an error the model sees", last)
	}

	// The server's own tools cannot be listed: the call finds no tool.
	out = f.Approve(t, direct)
	completed(t, out)
	res = f.results(t, out.RunID)
	last = res[len(res)-1]
	if last.ToolName != "srv__charge" || !last.IsError {
		t.Errorf("charge's result = %+v, want an error the model sees", last)
	}
	if got := f.shop.charges.Load(); got != 0 {
		t.Errorf("charges = %d, want 0", got)
	}
}

func TestSessionTheServerForgotIsReopenedOnce(t *testing.T) {
	f := newFixture(t, directYAML)
	paused := f.start(t, "direct")
	waitingOn(t, paused, "srv__charge")
	// The server forgets its sessions just before the charge arrives: it
	// answers 404 without running it, so the call is repeated on a new
	// session.
	f.shop.mu.Lock()
	f.shop.forget = "charge"
	f.shop.mu.Unlock()

	out := f.Approve(t, paused)
	completed(t, out)
	if got := f.shop.answered(http.StatusNotFound); got != 1 {
		t.Errorf("the server answered 404 %d times, want once", got)
	}
	if got := f.shop.charges.Load(); got != 1 {
		t.Errorf("charges = %d, want exactly 1", got)
	}
	res := f.results(t, out.RunID)
	if last := res[len(res)-1]; last.IsError {
		t.Errorf("charge's result = %+v, want the charge", last)
	}
}

func TestServerRestartedWhileTheRunWaited(t *testing.T) {
	f := newFixture(t, directYAML)
	paused := f.start(t, "direct")
	waitingOn(t, paused, "srv__charge")
	f.shop.restart()

	out := f.Approve(t, paused)
	completed(t, out)
	if got := f.shop.answered(http.StatusNotFound); got != 1 {
		t.Errorf("the server answered 404 %d times, want once (the listing on the old session)", got)
	}
	if got := f.shop.charges.Load(); got != 1 {
		t.Errorf("charges = %d, want exactly 1", got)
	}
}

func TestCutWriteIsNotRepeated(t *testing.T) {
	f := newFixture(t, directYAML)
	paused := f.start(t, "direct")
	waitingOn(t, paused, "srv__charge")
	// The connection breaks after the request was written: the charge may
	// have happened, so it is not repeated and the model is told.
	f.shop.mu.Lock()
	f.shop.cut = "charge"
	f.shop.mu.Unlock()

	out := f.Approve(t, paused)
	completed(t, out)
	if f.shop.cutPending() {
		t.Fatal("no charge request reached the server to be cut")
	}
	res := f.results(t, out.RunID)
	if last := res[len(res)-1]; last.ToolName != "srv__charge" || !last.IsError {
		t.Errorf("charge's result = %+v, want an error the model sees", last)
	}
	if got := f.shop.charges.Load(); got != 0 {
		t.Errorf("charges = %d, want 0 (the cut request never reached the tool)", got)
	}
}

func TestCutReadIsRepeatedAndToolErrorIsAResult(t *testing.T) {
	const y = `
identifier: reads
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: srv__lookup
            arguments: {order_id: "${order_id}"}
          - name: srv__void
            arguments: {order_id: "${order_id}"}
      - text: "Done."
mcp_servers:
  - name: srv
    url: ${MCP_URL}
    requires_approval: false
`
	f := newFixture(t, y)
	f.shop.mu.Lock()
	f.shop.cut = "lookup"
	f.shop.mu.Unlock()

	out := f.start(t, "reads")
	completed(t, out)
	if f.shop.cutPending() {
		t.Fatal("no lookup request reached the server to be cut")
	}
	if got := f.shop.lookups.Load(); got != 1 {
		t.Errorf("lookups = %d, want 1 (the repeat of the cut one)", got)
	}
	res := f.results(t, out.RunID)
	if len(res) != 2 {
		t.Fatalf("tool results = %+v, want lookup's and void's", res)
	}
	if res[0].IsError || !strings.Contains(res[0].Content, "order A-1") {
		t.Errorf("lookup's result = %+v, want the order", res[0])
	}
	if !res[1].IsError || res[1].Content != "error: the order is already closed" {
		t.Errorf("void's result = %+v, want the tool's error", res[1])
	}
}
