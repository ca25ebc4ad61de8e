package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
)

// maxDiscovered bounds what one discover call lists, so that a server with
// many tools cannot flood the model's context.
const maxDiscovered = 50

// metaTools are the three tools a meta_tool server offers. They reach the
// server only when called, so a server that is down at the start of a run
// still has its tools offered, and the failure is a result the model sees.
func metaTools(ep *endpoint, server string, approval bool) []runtime.Tool {
	return []runtime.Tool{
		&metaTool{ep: ep, server: server, kind: Discover, spec: runtime.ToolSpec{
			Name: server + Separator + Discover,
			Description: fmt.Sprintf("Lists the tools of the %s server: their names and what they do. "+
				"Give a query to list only the tools whose name or description contains it.", server),
			Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string",` +
				`"description":"words to look for; empty lists every tool"}},"additionalProperties":false}`),
			Effect: runtime.ReadOnly,
		}},
		&metaTool{ep: ep, server: server, kind: DescribeTool, spec: runtime.ToolSpec{
			Name:        server + Separator + DescribeTool,
			Description: fmt.Sprintf("Describes one tool of the %s server in full, with the JSON Schema of its arguments.", server),
			Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string",` +
				`"description":"the tool's name, as discover lists it"}},"required":["name"],"additionalProperties":false}`),
			Effect: runtime.ReadOnly,
		}},
		&metaTool{ep: ep, server: server, kind: Execute, spec: runtime.ToolSpec{
			Name: server + Separator + Execute,
			Description: fmt.Sprintf("Calls one tool of the %s server with its arguments. "+
				"Describe the tool first to learn what arguments it takes.", server),
			Parameters: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string",` +
				`"description":"the tool's name, as discover lists it"},"arguments":{"type":"object",` +
				`"description":"the tool's arguments, as its schema describes them"}},"required":["name"],"additionalProperties":false}`),
			// Which tool execute calls is only known per call: it is taken
			// to write, and needs an approval as the server's tools do.
			Effect:           runtime.NonIdempotentWrite,
			RequiresApproval: &approval,
		}},
	}
}

type metaTool struct {
	ep     *endpoint
	server string
	kind   string
	spec   runtime.ToolSpec
}

var _ runtime.StandingNamer = (*metaTool)(nil)

func (m *metaTool) Spec() runtime.ToolSpec { return m.spec }

// StandingName is the name a standing approval of a call covers. For
// execute it is the name the model would see for the tool the call names
// (ToolName), so that approving one execute for the session releases that
// tool alone, not every tool of the server; arguments that are not a JSON
// object or name no tool give execute's own name, as discover and
// describe_tool always do.
func (m *metaTool) StandingName(arguments json.RawMessage) string {
	if m.kind != Execute {
		return m.spec.Name
	}
	var args struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(arguments, &args); err != nil || args.Name == "" {
		return m.spec.Name
	}
	return ToolName(m.server, args.Name)
}

// Call discovers, describes or executes. Bad arguments, an unknown tool and
// a server that cannot be reached are errors the model sees.
func (m *metaTool) Call(ctx context.Context, inv runtime.Invocation) (string, error) {
	if m.ep == nil {
		return "", errNoCredential
	}
	var args struct {
		Query     string          `json:"query"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if len(inv.Arguments) > 0 {
		if err := json.Unmarshal(inv.Arguments, &args); err != nil {
			return "", fmt.Errorf("the arguments are not a JSON object: %w", err)
		}
	}
	switch m.kind {
	case Discover:
		return m.discover(ctx, args.Query)
	case DescribeTool:
		return m.describe(ctx, args.Name)
	default:
		if args.Name == "" {
			return "", fmt.Errorf("name the tool to execute")
		}
		return m.ep.callText(ctx, args.Name, args.Arguments, runtime.NonIdempotentWrite)
	}
}

type discovered struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Effect      string `json:"effect"`
}

func (m *metaTool) discover(ctx context.Context, query string) (string, error) {
	tools, err := m.ep.list(ctx)
	if err != nil {
		return "", fmt.Errorf("mcp server %s: %w", m.server, err)
	}
	q := strings.ToLower(strings.TrimSpace(query))
	out := struct {
		Tools []discovered `json:"tools"`
		More  int          `json:"more,omitempty"`
		Hint  string       `json:"hint,omitempty"`
	}{Tools: []discovered{}}
	for _, t := range tools {
		desc := firstLine(t.Description)
		if q != "" && !strings.Contains(strings.ToLower(t.Name+" "+t.Title+" "+t.Description), q) {
			continue
		}
		if len(out.Tools) == maxDiscovered {
			out.More++
			continue
		}
		out.Tools = append(out.Tools, discovered{Name: t.Name, Description: desc, Effect: string(effectOf(t))})
	}
	if out.More > 0 {
		out.Hint = "more tools match; give a narrower query"
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func (m *metaTool) describe(ctx context.Context, name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("name the tool to describe")
	}
	tools, err := m.ep.list(ctx)
	if err != nil {
		return "", fmt.Errorf("mcp server %s: %w", m.server, err)
	}
	for _, t := range tools {
		if t.Name == name {
			b, err := json.Marshal(struct {
				Name        string          `json:"name"`
				Title       string          `json:"title,omitempty"`
				Description string          `json:"description"`
				Effect      string          `json:"effect"`
				Arguments   json.RawMessage `json:"arguments_schema"`
			}{t.Name, t.Title, t.Description, string(effectOf(t)), inputSchema(t)})
			return string(b), err
		}
	}
	return "", fmt.Errorf("the %s server has no tool %q; call %s to list its tools", m.server, name, m.server+Separator+Discover)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}
