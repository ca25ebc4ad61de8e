package configfile

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

const forwarding = `identifier: orders-agent
provider:
  type: scripted
  script:
    rounds:
      - text: "Hi."
tools: []
identity_ttl: 90m
mcp_servers:
  - name: orders
    url: https://orders.internal/mcp
    identity: forward
  - name: local
    url: http://127.0.0.1:9000/mcp
    identity: forward
  - name: later
    url: ${ORDERS_URL}
    identity: forward
`

// identity and identity_ttl are read, checked and written back; a URL
// whose host comes from the environment is checked when it is reached.
func TestParseIdentity(t *testing.T) {
	cfg := mustParse(t, "agent.yaml", forwarding)
	if !cfg.Forwards() || cfg.IdentityLifetime() != 90*time.Minute || cfg.MCPServers[0].Identity != runtime.IdentityForward {
		t.Fatalf("parsed %+v, want three forwarding servers and a 90m lifetime", cfg)
	}
	out, err := Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again := mustParse(t, "again.yaml", string(out))
	if !reflect.DeepEqual(again.MCPServers, cfg.MCPServers) || again.IdentityTTL != "90m" {
		t.Errorf("written back and read again: %+v, want %+v", again.MCPServers, cfg.MCPServers)
	}
	plain := mustParse(t, "plain.yaml", strings.Replace(notifying, "notify:", "identity_ttl: \"\"\nnotify:", 1))
	if plain.Forwards() || plain.IdentityLifetime() != runtime.DefaultIdentityTTL {
		t.Errorf("a configuration without identity: forwards %v, lifetime %s", plain.Forwards(), plain.IdentityLifetime())
	}
	if err := runtime.CheckForwardURL("http://orders.internal/mcp"); err == nil {
		t.Error("CheckForwardURL accepts plain http to another host")
	}
	for _, ok := range []string{"https://orders.internal/mcp", "http://localhost:1/x", "http://[::1]:1/x", "http://127.0.0.2/x"} {
		if err := runtime.CheckForwardURL(ok); err != nil {
			t.Errorf("CheckForwardURL(%s) = %v", ok, err)
		}
	}
}
