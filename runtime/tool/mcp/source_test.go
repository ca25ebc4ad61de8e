package mcp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp"
)

func TestToolName(t *testing.T) {
	valid := regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	long := strings.Repeat("x", 40)
	tests := []struct {
		server, tool string
		want         string // "" when only the shape is checked
	}{
		{"srv", "lookup", "srv__lookup"},
		{"srv", "get_order-v2", "srv__get_order-v2"},
		{"srv", "files.read", ""},
		{"srv", long, ""},
		{"a-very-long-server-name-thirty", "files.read." + long, ""},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := mcp.ToolName(tt.server, tt.tool)
		if tt.want != "" && got != tt.want {
			t.Errorf("ToolName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
		}
		if !valid.MatchString(got) {
			t.Errorf("ToolName(%q, %q) = %q, which a model API refuses", tt.server, tt.tool, got)
		}
		if again := mcp.ToolName(tt.server, tt.tool); again != got {
			t.Errorf("ToolName(%q, %q) is %q, then %q", tt.server, tt.tool, got, again)
		}
		if server, _, ok := mcp.SplitToolName(got); !ok || server != tt.server {
			t.Errorf("SplitToolName(%q) = %q, %v, want server %q", got, server, ok, tt.server)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q are both named %q", other, tt.tool, got)
		}
		seen[got] = tt.tool
	}
	if a, b := mcp.ToolName("srv", "files.read"), mcp.ToolName("srv", "files_read"); a == b {
		t.Errorf("files.read and files_read are both named %q", a)
	}
}

func TestCanName(t *testing.T) {
	tests := []struct {
		server string
		meta   bool
		name   string
		want   bool
	}{
		{"srv", false, "srv__lookup", true},
		{"srv", false, "srv__files_read_0a1b2c3d", true},
		{"srv", false, "other__lookup", false},
		{"srv", false, "srv__", false},
		{"srv", false, "srv__files.read", false},
		{"srv", false, "srv__" + strings.Repeat("x", 60), false},
		{"srv", true, "srv__execute", true},
		{"srv", true, "srv__describe_tool", true},
		{"srv", true, "srv__lookup", false},
	}
	for _, tt := range tests {
		if got := mcp.CanName(tt.server, tt.meta, tt.name); got != tt.want {
			t.Errorf("CanName(%q, %v, %q) = %v, want %v", tt.server, tt.meta, tt.name, got, tt.want)
		}
	}
}

func TestCheckTemplate(t *testing.T) {
	// The words of runtime.CheckEnvName, which api_key_env and secret_env
	// share.
	const reserved = " is reserved: a configuration may not read Turnstile's own environment variables (TURNSTILE_*, HTTP_PROXY, HTTPS_PROXY, NO_PROXY)"
	for s, want := range map[string]string{
		"Bearer ${TOKEN}":         "",
		"${A}${B_2}":              "",
		"plain":                   "",
		"Bearer ${TOKEN":          "${ without a closing }",
		"Bearer ${}":              "${} does not name an environment variable",
		"Bearer ${TOKEN-NAME}":    "${TOKEN-NAME} does not name an environment variable",
		"${TURNSTILE_DSN}":        "TURNSTILE_DSN" + reserved,
		"${turnstile_state_keys}": "turnstile_state_keys" + reserved,
		"x ${HTTPS_PROXY}":        "HTTPS_PROXY" + reserved,
	} {
		err := mcp.CheckTemplate(s)
		if got := fmt.Sprint(err); (want == "" && err != nil) || (want != "" && got != want) {
			t.Errorf("CheckTemplate(%q) = %v, want %q", s, err, want)
		}
	}
}

// many serves tools in pages of two.
func many(t *testing.T, n int) string {
	t.Helper()
	server := sdk.NewServer(&sdk.Implementation{Name: "many", Version: "1"}, &sdk.ServerOptions{PageSize: 2})
	for i := range n {
		ann := &sdk.ToolAnnotations{}
		switch i % 3 {
		case 0:
			ann.ReadOnlyHint = true
		case 1:
			ann.IdempotentHint = true
		}
		sdk.AddTool(server, &sdk.Tool{Name: fmt.Sprintf("t%d", i), Description: "tool", Annotations: ann},
			func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
				return text("ok"), nil, nil
			})
	}
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestToolsListsEveryPageWithEffectAndApproval(t *testing.T) {
	url := many(t, 5)
	src := mcp.NewSource(mcp.Options{})
	t.Cleanup(func() { src.Close() })
	no := false
	cfg := &runtime.Configuration{Identifier: "x", MCPServers: []runtime.MCPServer{
		{Name: "one", URL: url},
		{Name: "two", URL: url, RequiresApproval: &no},
		{Name: "three", URL: url, MetaTool: true},
	}}
	tools, err := src.Tools(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]runtime.ToolSpec{}
	var names []string
	for _, tool := range tools {
		s := tool.Spec()
		got[s.Name] = s
		names = append(names, s.Name)
	}
	sort.Strings(names)
	want := []string{"one__t0", "one__t1", "one__t2", "one__t3", "one__t4",
		"three__describe_tool", "three__discover", "three__execute",
		"two__t0", "two__t1", "two__t2", "two__t3", "two__t4"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	for name, effect := range map[string]runtime.Effect{"one__t0": runtime.ReadOnly,
		"one__t1": runtime.IdempotentWrite, "one__t2": runtime.NonIdempotentWrite,
		"three__discover": runtime.ReadOnly, "three__execute": runtime.NonIdempotentWrite} {
		if got[name].Effect != effect {
			t.Errorf("%s has effect %s, want %s", name, got[name].Effect, effect)
		}
	}
	cfgNoPolicy := &runtime.Configuration{}
	for name, want := range map[string]bool{"one__t0": true, "one__t2": true, "two__t2": false,
		"three__discover": false, "three__describe_tool": false, "three__execute": true} {
		if needs := cfgNoPolicy.NeedsApproval(got[name]); needs != want {
			t.Errorf("%s needs an approval: %v, want %v", name, needs, want)
		}
	}
	var schema map[string]any
	if err := json.Unmarshal(got["one__t0"].Parameters, &schema); err != nil || schema["type"] != "object" {
		t.Errorf("one__t0's parameters = %s (%v), want the tool's input schema", got["one__t0"].Parameters, err)
	}
}

func TestToolsNamesTheMissingVariable(t *testing.T) {
	url := many(t, 1)
	src := mcp.NewSource(mcp.Options{Getenv: func(string) string { return "" }})
	t.Cleanup(func() { src.Close() })
	cfg := &runtime.Configuration{Identifier: "x", MCPServers: []runtime.MCPServer{
		{Name: "locked", URL: url, Headers: map[string]string{"Authorization": "Bearer ${MCP_MISSING_TOKEN}"}},
		{Name: "open", URL: url},
	}}
	tools, err := src.Tools(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "mcp server locked") || !strings.Contains(err.Error(), "MCP_MISSING_TOKEN") {
		t.Errorf("Tools error = %v, want one naming the server and MCP_MISSING_TOKEN", err)
	}
	if len(tools) != 1 || tools[0].Spec().Name != "open__t0" {
		t.Errorf("tools = %d, want the other server's one", len(tools))
	}
}

func TestClosedSourceGivesNoTools(t *testing.T) {
	url := many(t, 1)
	src := mcp.NewSource(mcp.Options{})
	cfg := &runtime.Configuration{Identifier: "x", MCPServers: []runtime.MCPServer{{Name: "srv", URL: url}}}
	tools, err := src.Tools(context.Background(), cfg)
	if err != nil || len(tools) != 1 {
		t.Fatalf("Tools = %d tools, %v", len(tools), err)
	}
	if err := src.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if _, err := src.Tools(context.Background(), cfg); err == nil {
		t.Error("Tools after Close: no error")
	}
	if _, err := tools[0].Call(context.Background(), runtime.Invocation{}); err == nil {
		t.Error("Call after Close: no error")
	}
}
