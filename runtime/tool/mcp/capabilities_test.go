package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp"
)

// capabilityRecorder is the SDK's server behind a handler that keeps the
// client capabilities of every request: those of initialize, and those a
// newer client sends in each request's _meta instead.
type capabilityRecorder struct {
	// legacy answers server/discover as a server that predates it would,
	// so that the client falls back to initialize.
	legacy bool

	mu   sync.Mutex
	caps []map[string]json.RawMessage
	// methods are the methods of the requests, in order.
	methods []string
}

func (c *capabilityRecorder) handler(t *testing.T) http.Handler {
	server := sdk.NewServer(&sdk.Implementation{Name: "caps", Version: "1"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "lookup", Description: "Looks up."},
		func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
			return text("ok"), nil, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Capabilities map[string]json.RawMessage `json:"capabilities"`
				Meta         map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		if len(body) > 0 {
			if err := json.Unmarshal(body, &msg); err != nil {
				t.Errorf("request body %q: %v", body, err)
			}
		}
		c.mu.Lock()
		c.methods = append(c.methods, msg.Method)
		if msg.Params.Capabilities != nil {
			c.caps = append(c.caps, msg.Params.Capabilities)
		}
		if raw, ok := msg.Params.Meta["io.modelcontextprotocol/clientCapabilities"]; ok {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Errorf("client capabilities in _meta %s: %v", raw, err)
			}
			c.caps = append(c.caps, m)
		}
		c.mu.Unlock()
		if c.legacy && msg.Method == "server/discover" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"method not found"}}`, msg.ID)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TestClientAdvertisesNoRoots: Turnstile's client answers no request of
// the server (its standalone stream is off), so it must advertise none of
// roots, sampling and elicitation, neither in initialize nor in the
// capabilities a newer protocol sends with every request.
func TestClientAdvertisesNoRoots(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		name := map[bool]string{false: "server/discover", true: "initialize"}[legacy]
		t.Run(name, func(t *testing.T) {
			rec := &capabilityRecorder{legacy: legacy}
			ts := httptest.NewServer(rec.handler(t))
			t.Cleanup(ts.Close)
			src := mcp.NewSource(mcp.Options{})
			t.Cleanup(func() { src.Close() })
			tools, err := src.Tools(context.Background(), &runtime.Configuration{MCPServers: []runtime.MCPServer{{Name: "caps", URL: ts.URL}}})
			if err != nil || len(tools) != 1 {
				t.Fatalf("Tools = %d tools, %v", len(tools), err)
			}
			if _, err := tools[0].Call(context.Background(), runtime.Invocation{}); err != nil {
				t.Fatalf("Call: %v", err)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if !contains(rec.methods, name) {
				t.Fatalf("the client sent %q, want %s among them", rec.methods, name)
			}
			if len(rec.caps) == 0 {
				t.Fatalf("no request carried client capabilities (methods %q)", rec.methods)
			}
			for i, caps := range rec.caps {
				for _, k := range []string{"roots", "sampling", "elicitation"} {
					if v, ok := caps[k]; ok {
						t.Errorf("capabilities %d advertise %s: %s", i, k, v)
					}
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
