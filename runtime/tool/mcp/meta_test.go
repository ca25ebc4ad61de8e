package mcp_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp"
)

// TestMetaToolStandingName: a standing approval of execute covers the tool
// the call names, by the name the model would see for it; discover,
// describe_tool and calls that name no tool keep their own name.
func TestMetaToolStandingName(t *testing.T) {
	src := mcp.NewSource(mcp.Options{})
	t.Cleanup(func() { src.Close() })
	// The meta-tool's three are offered without reaching the server.
	tools, err := src.Tools(context.Background(), &runtime.Configuration{MCPServers: []runtime.MCPServer{
		{Name: "billing", URL: closedURL(t), MetaTool: true}}})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]runtime.StandingNamer{}
	for _, tool := range tools {
		sn, ok := tool.(runtime.StandingNamer)
		if !ok {
			t.Fatalf("%s is no runtime.StandingNamer", tool.Spec().Name)
		}
		byName[tool.Spec().Name] = sn
	}
	tests := []struct {
		tool, args, want string
	}{
		{"billing__execute", `{"name":"charge","arguments":{"order_id":"A-1"}}`, "billing__charge"},
		{"billing__execute", `{"name":"files.read"}`, mcp.ToolName("billing", "files.read")},
		{"billing__execute", `{"arguments":{}}`, "billing__execute"},
		{"billing__execute", `{"name":""}`, "billing__execute"},
		{"billing__execute", `{"name":7}`, "billing__execute"},
		{"billing__execute", `not json`, "billing__execute"},
		{"billing__execute", `null`, "billing__execute"},
		{"billing__execute", ``, "billing__execute"},
		{"billing__discover", `{"query":"charge"}`, "billing__discover"},
		{"billing__describe_tool", `{"name":"charge"}`, "billing__describe_tool"},
	}
	for _, tt := range tests {
		sn := byName[tt.tool]
		if sn == nil {
			t.Fatalf("no tool %s among %v", tt.tool, byName)
		}
		if got := sn.StandingName(json.RawMessage(tt.args)); got != tt.want {
			t.Errorf("%s.StandingName(%s) = %q, want %q", tt.tool, tt.args, got, tt.want)
		}
	}
}
