package configfile

import (
	"strings"
	"testing"
)

// Lines 5, 9, 10 and 13 may name environment variables.
const readsEnv = `identifier: env-agent
provider:
  type: openai
  model: gpt-4o-mini
  api_key_env: OPENAI_API_KEY
  base_url: https://llm.example.net/v1
mcp_servers:
  - name: shop
    url: https://mcp.example.com/mcp
    headers: {Authorization: "Bearer ${SHOP_TOKEN}"}
notify:
  - url: https://hooks.example.com/t
    secret_env: HOOK_SECRET
`

// TestParseRefusesReservedVariables: no part of a configuration file may
// read Turnstile's own variables (with api_key_env: TURNSTILE_STATE_KEYS
// and someone's base_url, the first run would send the state keys as a
// bearer token). Each is one file:line error in the same words, and
// Normalize does not repeat it without a line.
func TestParseRefusesReservedVariables(t *testing.T) {
	if _, err := Parse("env.yaml", []byte(readsEnv), knownTool); err != nil {
		t.Fatalf("the file reading its own variables does not parse: %v", err)
	}
	const rule = " is reserved: a configuration may not read Turnstile's own environment variables (TURNSTILE_*, HTTP_PROXY, HTTPS_PROXY, NO_PROXY)"
	tests := []struct {
		name string
		line int
		with string
		want string
	}{
		{"api_key_env", 5, "  api_key_env: TURNSTILE_STATE_KEYS", "env.yaml:5: provider api_key_env: TURNSTILE_STATE_KEYS" + rule},
		{"api_key_env lower case", 5, "  api_key_env: turnstile_dsn", "env.yaml:5: provider api_key_env: turnstile_dsn" + rule},
		{"api_key_env proxy", 5, "  api_key_env: HTTPS_PROXY", "env.yaml:5: provider api_key_env: HTTPS_PROXY" + rule},
		{"mcp header", 10, `    headers: {Authorization: "Bearer ${TURNSTILE_DSN}"}`, "env.yaml:10: header Authorization: TURNSTILE_DSN" + rule},
		{"mcp url", 9, "    url: https://mcp.example.com/${TURNSTILE_STATE_KEYS}", "env.yaml:9: the url of mcp server shop: TURNSTILE_STATE_KEYS" + rule},
		{"secret_env", 13, "    secret_env: TURNSTILE_DSN", "env.yaml:13: notify entry 1: secret_env: TURNSTILE_DSN" + rule},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := replaceLine(t, readsEnv, tt.line, tt.with)
			cfg, err := Parse("env.yaml", []byte(src), knownTool)
			if err == nil {
				t.Fatalf("Parse: no error for\n%s\nwant %q", src, tt.want)
			}
			if cfg != nil {
				t.Errorf("Parse returned a configuration with its error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Parse error:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
	if strings.Contains(readsEnv, "TURNSTILE_") {
		t.Fatal("the sound file names a reserved variable")
	}
}
