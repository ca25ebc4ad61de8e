package runtime_test

import (
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestReservedEnv: Turnstile's own variables, in any case, and the proxy
// variables net/http reads are reserved; a configuration's own are not.
func TestReservedEnv(t *testing.T) {
	for name, want := range map[string]bool{
		"TURNSTILE_DSN":        true,
		"TURNSTILE_STATE_KEYS": true,
		"turnstile_state_keys": true,
		"TURNSTILE_ANYTHING":   true,
		"HTTPS_PROXY":          true,
		"https_proxy":          true,
		"HTTP_PROXY":           true,
		"NO_PROXY":             true,
		"OPENAI_API_KEY":       false,
		"HOOK_SECRET":          false,
		"MY_TURNSTILE_DSN":     false,
		"MYSQL_PWD":            false, // the MySQL driver does not read it
	} {
		if got := runtime.ReservedEnv(name); got != want {
			t.Errorf("ReservedEnv(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestNormalizeRefusesReservedVariables: a configuration stored by any
// path (not only config apply) cannot name Turnstile's own variables as
// its provider key, a webhook secret or a ${NAME} of an MCP server.
func TestNormalizeRefusesReservedVariables(t *testing.T) {
	const rule = " is reserved: a configuration may not read Turnstile's own environment variables (TURNSTILE_*, HTTP_PROXY, HTTPS_PROXY, NO_PROXY)"
	tests := []struct {
		name string
		edit func(*runtime.Configuration)
		want string
	}{
		{"api_key_env", func(c *runtime.Configuration) {
			c.Provider = runtime.ProviderSpec{Type: "openai", Model: "m", BaseURL: "https://llm.example.net/v1", APIKeyEnv: "TURNSTILE_STATE_KEYS"}
		}, "configuration x: provider api_key_env: TURNSTILE_STATE_KEYS" + rule},
		{"secret_env", func(c *runtime.Configuration) {
			c.Notify = []runtime.Notify{{URL: "https://hooks.example.com/t", SecretEnv: "TURNSTILE_DSN"}}
		}, "configuration x: notify 1: secret_env: TURNSTILE_DSN" + rule},
		{"mcp url", func(c *runtime.Configuration) {
			c.MCPServers = []runtime.MCPServer{{Name: "shop", URL: "https://mcp.example.com/${https_proxy}"}}
		}, "configuration x: mcp server shop: url: https_proxy" + rule},
		{"mcp header", func(c *runtime.Configuration) {
			c.MCPServers = []runtime.MCPServer{{Name: "shop", URL: "https://mcp.example.com/mcp",
				Headers: map[string]string{"Authorization": "Bearer ${TURNSTILE_DSN}"}}}
		}, "configuration x: mcp server shop: header Authorization: TURNSTILE_DSN" + rule},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := runtime.Configuration{Identifier: "x"}
			tt.edit(&cfg)
			err := cfg.Normalize()
			if err == nil || err.Error() != tt.want {
				t.Errorf("Normalize = %v\nwant %s", err, tt.want)
			}
		})
	}
	ok := runtime.Configuration{Identifier: "x",
		Provider:   runtime.ProviderSpec{Type: "openai", Model: "m", APIKeyEnv: "OPENAI_API_KEY"},
		Notify:     []runtime.Notify{{URL: "https://hooks.example.com/t", SecretEnv: "HOOK_SECRET"}},
		MCPServers: []runtime.MCPServer{{Name: "shop", URL: "${SHOP_URL}", Headers: map[string]string{"Authorization": "Bearer ${SHOP_TOKEN}"}}}}
	if err := ok.Normalize(); err != nil {
		t.Errorf("Normalize of a configuration reading its own variables: %v", err)
	}
	if err := runtime.CheckEnvName("TURNSTILE_DSN"); err == nil || !strings.HasPrefix(err.Error(), "TURNSTILE_DSN"+rule) {
		t.Errorf("CheckEnvName(TURNSTILE_DSN) = %v", err)
	}
}
