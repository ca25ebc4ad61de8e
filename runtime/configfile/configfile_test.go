package configfile

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
)

const refundAgent = `identifier: refund-agent
name: Refund agent
provider:
  type: scripted
  model: gpt-4o-mini
  script:
    rounds:
      - delay: 3s
        text: "Looking up the order."
        tool_calls:
          - name: lookup_order
            arguments: {order_id: "${order_id}", limit: 2}
      - text: ["Refunding ", "now."]
        tool_calls: [{name: refund_order}]
      - text: "Done."
system_prompt: |
  You refund orders.
  Politely.
tools: [lookup_order, refund_order]
max_iterations: 7
require_second_approver: true
privacy_level: redacted
tool_policies:
  refund_order: {requires_approval: true, grant: refunds}
  lookup_order: {requires_approval: false}
`

var demoTools = []string{"lookup_order", "refund_order", "ask_operator"}

func knownTool(name string) bool {
	for _, t := range demoTools {
		if t == name {
			return true
		}
	}
	return false
}

func mustParse(t *testing.T, filename, src string) *runtime.Configuration {
	t.Helper()
	cfg, err := Parse(filename, []byte(src), knownTool)
	if err != nil {
		t.Fatalf("Parse(%s): %v", filename, err)
	}
	return cfg
}

func TestParseGood(t *testing.T) {
	got := mustParse(t, "refund.yaml", refundAgent)
	yes, no := true, false
	script, err := scripted.Parse("s", []byte(`rounds:
  - delay: 3s
    text: "Looking up the order."
    tool_calls: [{name: lookup_order, arguments: {order_id: "${order_id}", limit: 2}}]
  - text: ["Refunding ", "now."]
    tool_calls: [{name: refund_order}]
  - text: "Done."
`), nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := script.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := &runtime.Configuration{
		Identifier:            "refund-agent",
		Name:                  "Refund agent",
		Active:                true,
		Provider:              runtime.ProviderSpec{Type: "scripted", Model: "gpt-4o-mini", Script: raw},
		SystemPrompt:          "You refund orders.\nPolitely.\n",
		Tools:                 []string{"lookup_order", "refund_order"},
		MaxIterations:         7,
		RequireSecondApprover: true,
		PrivacyLevel:          runtime.PrivacyRedacted,
		ToolPolicies: map[string]runtime.ToolPolicy{
			"refund_order": {RequiresApproval: &yes, Grant: "refunds"},
			"lookup_order": {RequiresApproval: &no},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v\nscript got %s\nscript want %s", got, want, got.Provider.Script, want.Provider.Script)
	}
}

func TestParseDefaults(t *testing.T) {
	got := mustParse(t, "min.yaml", "identifier: chat\nprovider: {type: openai, base_url: 'http://127.0.0.1:9/v1', api_key_env: KEY}\n")
	want := &runtime.Configuration{
		Identifier:    "chat",
		Name:          "chat",
		Active:        true,
		Provider:      runtime.ProviderSpec{Type: "openai", BaseURL: "http://127.0.0.1:9/v1", APIKeyEnv: "KEY"},
		Tools:         []string{},
		MaxIterations: runtime.DefaultMaxIterations,
		PrivacyLevel:  runtime.PrivacyMetadata,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %+v\nwant %+v", got, want)
	}
	inactive := mustParse(t, "off.yaml", "identifier: chat\nactive: false\nprovider: {type: openai}\n")
	if inactive.Active {
		t.Errorf("active: false parsed as Active = true")
	}
}

// base is a valid configuration; the error cases change one line of it.
const base = `identifier: refund-agent
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: lookup_order}]
tools: [lookup_order, refund_order]
max_iterations: 5
privacy_level: metadata
tool_policies:
  refund_order: {grant: refunds}
`

func replaceLine(t *testing.T, src string, line int, with string) string {
	t.Helper()
	lines := strings.Split(src, "\n")
	if line < 1 || line > len(lines) {
		t.Fatalf("no line %d", line)
	}
	lines[line-1] = with
	return strings.Join(lines, "\n")
}

func TestParseErrors(t *testing.T) {
	if _, err := Parse("agent.yaml", []byte(base), knownTool); err != nil {
		t.Fatalf("the base configuration does not parse: %v", err)
	}
	tests := []struct {
		name string
		line int    // line of base to replace
		with string // its replacement
		want string // the error's beginning
	}{
		{"yaml syntax", 8, "max_iterations: [5", "agent.yaml:8: did not find expected ',' or ']'"},
		{"unknown key", 9, "privacy: metadata", `agent.yaml:9: unknown key "privacy" in the configuration`},
		{"unknown provider key", 3, "  kind: scripted", `agent.yaml:3: unknown key "kind" in provider`},
		{"unknown policy key", 11, "  refund_order: {grnt: refunds}", `agent.yaml:11: unknown key "grnt" in the policy of refund_order`},
		{"key twice", 9, "identifier: again", `agent.yaml:9: "identifier" is given twice (first on line 1)`},
		{"wrong type: integer", 8, "max_iterations: five", "agent.yaml:8: max_iterations must be a whole number"},
		{"wrong type: boolean", 8, "require_second_approver: sometimes", "agent.yaml:8: require_second_approver must be true or false"},
		{"wrong type: list", 7, "tools: lookup_order", "agent.yaml:7: tools must be a list of strings"},
		{"wrong type: string", 1, "identifier: [a]", "agent.yaml:1: identifier must be a string"},
		{"missing identifier", 1, "name: Refund agent", "agent.yaml:1: identifier is required"},
		{"bad identifier", 1, "identifier: Refund_Agent", `agent.yaml:1: identifier "Refund_Agent" must be lower-case`},
		{"identifier too long", 1, "identifier: " + strings.Repeat("a", 101), "agent.yaml:1: identifier"},
		{"unknown tool", 7, "tools: [lookup_order, refnd_order]", `agent.yaml:7: unknown tool "refnd_order"`},
		{"tool twice", 7, "tools: [lookup_order, refund_order, lookup_order]", `agent.yaml:7: tool "lookup_order" is listed twice`},
		{"policy for a tool outside tools", 11, "  ask_operator: {grant: refunds}", `agent.yaml:11: tool_policies names "ask_operator", which is not in tools`},
		{"script calls an unknown tool", 6, "      - tool_calls: [{name: refnd_order}]", `agent.yaml:6: unknown tool "refnd_order"`},
		{"script calls a tool outside tools", 6, "      - tool_calls: [{name: ask_operator}]", `agent.yaml:6: unknown tool "ask_operator"`},
		{"script with a bad delay", 6, "      - delay: soon", `agent.yaml:6: delay "soon" is not a duration`},
		{"unknown provider type", 3, "  type: claude", `agent.yaml:3: provider type must be scripted or openai, not "claude"`},
		{"max_iterations above the ceiling", 8, "max_iterations: 25", "agent.yaml:8: configuration refund-agent: max_iterations must be between 1 and 20, not 25"},
		{"max_iterations zero", 8, "max_iterations: 0", "agent.yaml:8: max_iterations must be between 1 and 20, not 0"},
		{"max_iterations negative", 8, "max_iterations: -1", "agent.yaml:8: configuration refund-agent: max_iterations must be between 1 and 20"},
		{"privacy level", 9, "privacy_level: everything", `agent.yaml:9: configuration refund-agent: privacy_level must be metadata, redacted or full, not "everything"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := replaceLine(t, base, tt.line, tt.with)
			_, err := Parse("agent.yaml", []byte(src), knownTool)
			if err == nil {
				t.Fatalf("Parse: no error for\n%s\nwant %q", src, tt.want)
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.want) {
				t.Errorf("Parse error:\n got %q\nwant prefix %q", got, tt.want)
			}
		})
	}
}

// TestParseReportsEveryError: a file with three errors gets all three, one
// per line of the message and in the order of the file's lines, though
// the parser finds them in another order (the unknown key first, the
// provider last).
func TestParseReportsEveryError(t *testing.T) {
	src := replaceLine(t, base, 3, "  type: claude")
	src = replaceLine(t, src, 8, "max_iterations: five")
	src = replaceLine(t, src, 9, "privacy: metadata")
	cfg, err := Parse("agent.yaml", []byte(src), knownTool)
	if cfg != nil {
		t.Errorf("Parse returned a configuration with its errors: %+v", cfg)
	}
	want := `agent.yaml:3: provider type must be scripted or openai, not "claude"` + "\n" +
		"agent.yaml:8: max_iterations must be a whole number\n" +
		`agent.yaml:9: unknown key "privacy" in the configuration (allowed: identifier, name, description, active, provider, system_prompt, title, tools, max_iterations, require_second_approver, approvals_required, privacy_level, tool_policies, mcp_servers, decision_timeout, on_timeout, escalate_grant, notify, identity_ttl, policy)`
	if err == nil || err.Error() != want {
		t.Fatalf("Parse error:\n got %v\nwant %s", err, want)
	}
	if joined, ok := err.(interface{ Unwrap() []error }); !ok || len(joined.Unwrap()) != 3 {
		t.Errorf("Parse error %T does not unwrap to the three errors", err)
	}
}

// TestParseErrorsDoNotRepeatThemselves: a broken part of the file is
// reported once, not again by each check that reads it.
func TestParseErrorsDoNotRepeatThemselves(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // the whole message
	}{
		{"tools that are no list", replaceLine(t, base, 7, "tools: lookup_order"),
			"agent.yaml:7: tools must be a list of strings"},
		{"a misspelt identifier", replaceLine(t, base, 1, "identifer: refund-agent"),
			`agent.yaml:1: unknown key "identifer" in the configuration (allowed: ` + strings.Join(topKeys, ", ") + ")"},
		{"a misspelt provider type", replaceLine(t, base, 3, "  kind: scripted"),
			`agent.yaml:3: unknown key "kind" in provider (allowed: ` + strings.Join(providerKeys, ", ") + ")"},
		{"a broken mcp server the script calls", replaceLine(t, mcpAgent, 13, "  - name: Shop_1"),
			`agent.yaml:13: mcp server name "Shop_1" must be lower-case letters, digits and dashes, starting with a letter or digit, at most 30 characters`},
		{"two errors in tools", replaceLine(t, base, 7, "tools: [lookup_order, refnd_order, lookup_order]"),
			"agent.yaml:7: unknown tool \"refnd_order\"\nagent.yaml:7: tool \"lookup_order\" is listed twice\n" +
				`agent.yaml:11: tool_policies names "refund_order", which is not in tools (a tool of an mcp server is named <server>__<tool>)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("agent.yaml", []byte(tt.src), knownTool)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse error:\n got %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestParseProviderErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"empty file", "", "a.yaml:1: the configuration is empty"},
		{"only a comment", "# later\n", "a.yaml:1: the configuration is empty"},
		{"not a mapping", "- a\n", "a.yaml:1: the configuration must be a mapping"},
		{"no provider", "identifier: a\n", "a.yaml:1: provider is required"},
		{"no provider type", "identifier: a\nprovider:\n  model: m\n", "a.yaml:2: provider type is required"},
		{"script with no rounds", "identifier: a\nprovider:\n  type: scripted\n  script:\n    rounds: []\n", "a.yaml:5: the script has no rounds"},
		{"scripted without script", "identifier: a\nprovider:\n  type: scripted\n  model: m\n", "a.yaml:3: the scripted provider needs a script"},
		{"script for openai", "identifier: a\nprovider:\n  type: openai\n  script: {rounds: [{text: hi}]}\n", "a.yaml:4: a script is only for the scripted provider"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("a.yaml", []byte(tt.src), nil)
			if err == nil {
				t.Fatalf("Parse: no error, want %q", tt.want)
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.want) {
				t.Errorf("Parse error:\n got %q\nwant prefix %q", got, tt.want)
			}
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		src  string
	}{
		{"full", refundAgent},
		{"minimal", "identifier: chat\nprovider: {type: openai}\n"},
		{"described", "identifier: chat\ndescription: Answers questions.\nprovider: {type: openai}\n"},
		{"odd strings", "identifier: odd\nname: 'true'\nsystem_prompt: \"line one\\n  indented: yes # not a comment\"\nprovider: {type: openai, model: '5'}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := mustParse(t, "in.yaml", tt.src)
			out, err := Marshal(want)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			got := mustParse(t, "out.yaml", string(out))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("round trip through\n%s\n got %+v\nwant %+v", out, got, want)
			}
		})
	}
}

func TestMarshalBrokenScript(t *testing.T) {
	cfg := &runtime.Configuration{Identifier: "x", Provider: runtime.ProviderSpec{Type: "scripted", Script: json.RawMessage(`{"rounds":[]}`)}}
	if _, err := Marshal(cfg); err == nil || !strings.Contains(err.Error(), "no rounds") {
		t.Errorf("Marshal error = %v, want one about the script having no rounds", err)
	}
}
