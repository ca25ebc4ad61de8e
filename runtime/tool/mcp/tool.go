package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnstile-dev/turnstile/runtime"
)

// tool is one tool of an MCP server, as a run calls it.
type tool struct {
	ep   *endpoint // nil for a forwarding server's tool listed without a credential
	name string    // the server's name for it
	spec runtime.ToolSpec
}

func newTool(ep *endpoint, server string, t *mcpsdk.Tool, approval bool) *tool {
	desc := t.Description
	if desc == "" {
		desc = t.Title
	}
	return &tool{ep: ep, name: t.Name, spec: runtime.ToolSpec{
		Name:             ToolName(server, t.Name),
		Description:      desc,
		Parameters:       inputSchema(t),
		Effect:           effectOf(t),
		RequiresApproval: &approval,
	}}
}

// effectOf reads a tool's annotations; a tool without any is taken to
// write, and not idempotently.
func effectOf(t *mcpsdk.Tool) runtime.Effect {
	switch a := t.Annotations; {
	case a == nil:
		return runtime.NonIdempotentWrite
	case a.ReadOnlyHint:
		return runtime.ReadOnly
	case a.IdempotentHint:
		return runtime.IdempotentWrite
	}
	return runtime.NonIdempotentWrite
}

func inputSchema(t *mcpsdk.Tool) json.RawMessage {
	if t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil && string(b) != "null" {
			return b
		}
	}
	return json.RawMessage(`{"type":"object"}`)
}

func (t *tool) Spec() runtime.ToolSpec { return t.spec }

// Call calls the tool on its server. A result the server marks as an error
// is returned as an error carrying its text; so is a failure to reach the
// server.
func (t *tool) Call(ctx context.Context, inv runtime.Invocation) (string, error) {
	if t.ep == nil {
		return "", errNoCredential
	}
	return t.ep.callText(ctx, t.name, inv.Arguments, t.spec.Effect)
}

// callText calls a tool and reads its result as the text a model sees.
func (e *endpoint) callText(ctx context.Context, name string, args json.RawMessage, effect runtime.Effect) (string, error) {
	res, err := e.call(ctx, name, args, effect)
	if err != nil {
		return "", fmt.Errorf("mcp tool %s: %w", name, err)
	}
	text := resultText(res)
	if res.IsError {
		if text == "" {
			text = "the tool failed without saying why"
		}
		return "", errors.New(text)
	}
	return text, nil
}

// resultText joins a result's content: text as it is, other content as a
// short note or its JSON, and the structured content when there is no
// text.
func resultText(res *mcpsdk.CallToolResult) string {
	var parts []string
	hasText := false
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcpsdk.TextContent:
			parts, hasText = append(parts, c.Text), true
		case *mcpsdk.ImageContent:
			parts = append(parts, fmt.Sprintf("[image, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcpsdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio, %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcpsdk.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				parts, hasText = append(parts, c.Resource.Text), true
			} else if c.Resource != nil {
				parts = append(parts, fmt.Sprintf("[resource %s, %s, %d bytes]", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob)))
			}
		default:
			if b, err := json.Marshal(c); err == nil {
				parts = append(parts, string(b))
			}
		}
	}
	if !hasText && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	return strings.Join(parts, "\n")
}
