package configfile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

const mcpAgent = `identifier: mcp-agent
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: shop__lookup
          - name: crm__execute
            arguments: {name: find, arguments: {q: x}}
      - text: Done.
tools: [lookup_order]
mcp_servers:
  - name: shop
    url: https://mcp.example.com/mcp
    headers:
      Authorization: Bearer ${SHOP_TOKEN}
      X-Tenant: acme
  - name: crm
    url: ${CRM_URL}
    requires_approval: false
    meta_tool: true
tool_policies:
  shop__lookup: {requires_approval: false}
  crm__execute: {requires_approval: true, grant: crm}
  lookup_order: {grant: orders}
`

func TestParseMCPServers(t *testing.T) {
	got := mustParse(t, "mcp.yaml", mcpAgent)
	no, yes := false, true
	want := []runtime.MCPServer{
		{Name: "shop", URL: "https://mcp.example.com/mcp",
			Headers: map[string]string{"Authorization": "Bearer ${SHOP_TOKEN}", "X-Tenant": "acme"}},
		{Name: "crm", URL: "${CRM_URL}", RequiresApproval: &no, MetaTool: true},
	}
	if !reflect.DeepEqual(got.MCPServers, want) {
		t.Errorf("MCPServers:\n got %+v\nwant %+v", got.MCPServers, want)
	}
	policies := map[string]runtime.ToolPolicy{
		"shop__lookup": {RequiresApproval: &no},
		"crm__execute": {RequiresApproval: &yes, Grant: "crm"},
		"lookup_order": {Grant: "orders"},
	}
	if !reflect.DeepEqual(got.ToolPolicies, policies) {
		t.Errorf("ToolPolicies:\n got %+v\nwant %+v", got.ToolPolicies, policies)
	}
	if !reflect.DeepEqual(got.Tools, []string{"lookup_order"}) {
		t.Errorf("Tools = %v, want [lookup_order]", got.Tools)
	}
}

func TestParseMCPErrors(t *testing.T) {
	if _, err := Parse("mcp.yaml", []byte(mcpAgent), knownTool); err != nil {
		t.Fatalf("the MCP configuration does not parse: %v", err)
	}
	tests := []struct {
		name string
		line int
		with string
		want string
	}{
		{"unknown key", 15, "    header:", `mcp.yaml:15: unknown key "header" in an mcp server (allowed: name, url, headers, requires_approval, meta_tool, identity)`},
		{"no name", 13, "  - nam: shop", `mcp.yaml:13: unknown key "nam"`},
		{"bad name", 13, "  - name: Shop_1", `mcp.yaml:13: mcp server name "Shop_1" must be lower-case letters`},
		{"name too long", 13, "  - name: " + strings.Repeat("s", 31), `mcp.yaml:13: mcp server name`},
		{"name twice", 18, "  - name: shop", `mcp.yaml:18: mcp server "shop" is listed twice (first on line 13)`},
		{"no url", 14, "    url: ''", `mcp.yaml:13: mcp server shop needs a url`},
		{"not a url", 14, "    url: mcp.example.com", `mcp.yaml:14: the url of mcp server shop: "mcp.example.com" is not an http or https URL`},
		{"bad url template", 19, "    url: ${CRM_URL", `mcp.yaml:19: the url of mcp server crm: ${ without a closing }`},
		{"bad header template", 16, "      Authorization: Bearer ${SHOP TOKEN}", `mcp.yaml:16: header Authorization: ${SHOP TOKEN} does not name an environment variable`},
		{"reserved header", 17, "      Mcp-Session-Id: x", `mcp.yaml:17: header Mcp-Session-Id is set by the MCP transport`},
		{"bad header name", 17, "      X Tenant: acme", `mcp.yaml:17: "X Tenant" is not a valid header name`},
		{"header twice", 17, "      authorization: x", `mcp.yaml:17: header authorization is given twice (first on line 16)`},
		{"header not a string", 17, "      X-Tenant: [acme]", `mcp.yaml:17: header X-Tenant must be a string`},
		{"approval not a boolean", 20, "    requires_approval: maybe", `mcp.yaml:20: requires_approval must be true or false`},
		{"meta_tool not a boolean", 21, "    meta_tool: 1", `mcp.yaml:21: meta_tool must be true or false`},
		{"policy for an unknown server", 23, "  crm2__lookup: {requires_approval: false}", `mcp.yaml:23: tool_policies names "crm2__lookup", which is not in tools`},
		{"policy for a hidden tool of a meta server", 24, "  crm__find: {grant: crm}", `mcp.yaml:24: tool_policies names "crm__find", which mcp server crm cannot offer`},
		{"policy for a malformed tool name", 23, "  shop__look.up: {grant: x}", `mcp.yaml:23: tool_policies names "shop__look.up", which mcp server shop cannot offer`},
		{"mcp tool in tools", 11, "tools: [lookup_order, shop__lookup]", `mcp.yaml:11: tool "shop__lookup" belongs to mcp server shop`},
		{"script calls a tool of no server", 7, "          - name: other__lookup", `mcp.yaml:7: unknown tool "other__lookup"`},
		{"script calls a hidden tool of a meta server", 8, "          - name: crm__find", `mcp.yaml:8: unknown tool "crm__find"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := replaceLine(t, mcpAgent, tt.line, tt.with)
			_, err := Parse("mcp.yaml", []byte(src), knownTool)
			if err == nil {
				t.Fatalf("Parse: no error for\n%s\nwant %q", src, tt.want)
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.want) {
				t.Errorf("Parse error:\n got %q\nwant prefix %q", got, tt.want)
			}
		})
	}
}

func TestParseMCPShapeErrors(t *testing.T) {
	const head = "identifier: a\nprovider: {type: openai}\n"
	tests := []struct {
		name, src, want string
	}{
		{"not a list", "mcp_servers: {name: shop}\n", "a.yaml:3: mcp_servers must be a list of servers"},
		{"entry not a mapping", "mcp_servers: [shop]\n", "a.yaml:3: an mcp server must be a mapping"},
		{"headers not a mapping", "mcp_servers:\n  - name: shop\n    url: http://x\n    headers: [a]\n", "a.yaml:6: the headers of mcp server shop must be a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("a.yaml", []byte(head+tt.src), nil)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Parse error = %v, want prefix %q", err, tt.want)
			}
		})
	}
}
