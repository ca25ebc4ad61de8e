// Package configfile reads and writes agent configuration files: the YAML that
// `turnstile config apply` takes and the demo configurations embedded in the
// binary. Every error it reports points at a line of the file.
package configfile

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/internal/yamlnode"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp"
)

// The provider types a configuration may name.
const (
	ProviderScripted = "scripted"
	ProviderOpenAI   = "openai"
)

var identifierPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,99}$`)

// Parse reads a configuration file and returns it normalized. Every error
// says "file:line: message": YAML syntax, an unknown key or a key given
// twice, a value of the wrong type, a missing or malformed identifier, a
// tool that knownTool does not know (knownTool may be nil: no check), a tool
// policy for a tool outside `tools`, an error in an inline script (whose
// calls must name tools of `tools`), a malformed `mcp_servers` entry, and
// the rules of runtime.Configuration.Normalize.
//
// The tools of an MCP server are only known when a run starts, so they are
// named by the name the model sees, "<server>__<tool>" (mcp.ToolName): a
// tool policy or a scripted call may name any such tool of a server the
// configuration lists (for a meta_tool server, only its discover,
// describe_tool and execute), and `tools` may name none.
func Parse(filename string, data []byte, knownTool func(string) bool) (*runtime.Configuration, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlnode.SyntaxError(filename, data, err)
	}
	p := &parser{File: yamlnode.File(filename), knownTool: knownTool}
	return p.configuration(&doc)
}

type parser struct {
	yamlnode.File
	knownTool func(string) bool
}

// entry is one key of a mapping and its value.
type entry struct{ key, value *yaml.Node }

// mapping returns the entries of a mapping by key, rejecting keys outside
// allowed and keys given twice.
func (p *parser) mapping(n *yaml.Node, what string, allowed ...string) (map[string]entry, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.Errorf(n, "%s must be a mapping", what)
	}
	out := map[string]entry{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], yamlnode.Resolve(n.Content[i+1])
		if first, ok := out[k.Value]; ok {
			return nil, p.Errorf(k, "%q is given twice (first on line %d)", k.Value, first.key.Line)
		}
		if allowed != nil && !contains(allowed, k.Value) {
			return nil, p.Errorf(k, "unknown key %q in %s (allowed: %s)", k.Value, what, strings.Join(allowed, ", "))
		}
		out[k.Value] = entry{k, v}
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// str reads a string; any scalar reads as its text, null as "".
func (p *parser) str(e entry) (string, error) {
	if yamlnode.IsNull(e.value) {
		return "", nil
	}
	if e.value.Kind != yaml.ScalarNode {
		return "", p.Errorf(e.value, "%s must be a string", e.key.Value)
	}
	return e.value.Value, nil
}

func (p *parser) boolean(e entry) (bool, error) {
	var b bool
	if e.value.Kind != yaml.ScalarNode || e.value.Tag != "!!bool" || e.value.Decode(&b) != nil {
		return false, p.Errorf(e.value, "%s must be true or false", e.key.Value)
	}
	return b, nil
}

func (p *parser) integer(e entry) (int, error) {
	var i int
	if e.value.Kind != yaml.ScalarNode || e.value.Tag != "!!int" || e.value.Decode(&i) != nil {
		return 0, p.Errorf(e.value, "%s must be a whole number", e.key.Value)
	}
	return i, nil
}

func (p *parser) stringList(e entry) ([]string, error) {
	out := []string{}
	if yamlnode.IsNull(e.value) {
		return out, nil
	}
	if e.value.Kind != yaml.SequenceNode {
		return nil, p.Errorf(e.value, "%s must be a list of strings", e.key.Value)
	}
	for _, n := range e.value.Content {
		n = yamlnode.Resolve(n)
		if n.Kind != yaml.ScalarNode || yamlnode.IsNull(n) || n.Value == "" {
			return nil, p.Errorf(n, "%s must be a list of strings", e.key.Value)
		}
		out = append(out, n.Value)
	}
	return out, nil
}

var topKeys = []string{
	"identifier", "name", "active", "provider", "system_prompt", "tools",
	"max_iterations", "require_second_approver", "privacy_level", "tool_policies",
	"mcp_servers",
}

var mcpServerKeys = []string{"name", "url", "headers", "requires_approval", "meta_tool"}

var providerKeys = []string{"type", "model", "base_url", "api_key_env", "script"}

var policyKeys = []string{"requires_approval", "grant"}

func (p *parser) configuration(doc *yaml.Node) (*runtime.Configuration, error) {
	root := yamlnode.Resolve(doc)
	if yamlnode.IsNull(root) {
		return nil, p.Errorf(doc, "the configuration is empty")
	}
	top, err := p.mapping(root, "the configuration", topKeys...)
	if err != nil {
		return nil, err
	}
	cfg := &runtime.Configuration{Active: true, Tools: []string{}}

	// Strings first, then the rest; the script last, since its calls must
	// name tools of the list.
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"identifier", &cfg.Identifier},
		{"name", &cfg.Name},
		{"system_prompt", &cfg.SystemPrompt},
		{"privacy_level", (*string)(&cfg.PrivacyLevel)},
	} {
		if e, ok := top[f.key]; ok {
			if *f.dst, err = p.str(e); err != nil {
				return nil, err
			}
		}
	}
	if e, ok := top["identifier"]; !ok || cfg.Identifier == "" {
		at := root
		if ok {
			at = e.key
		}
		return nil, p.Errorf(at, "identifier is required")
	} else if !identifierPattern.MatchString(cfg.Identifier) {
		return nil, p.Errorf(e.value, "identifier %q must be lower-case letters, digits and dashes, starting with a letter or digit, at most 100 characters", cfg.Identifier)
	}
	if e, ok := top["active"]; ok && !yamlnode.IsNull(e.value) {
		if cfg.Active, err = p.boolean(e); err != nil {
			return nil, err
		}
	}
	if e, ok := top["require_second_approver"]; ok && !yamlnode.IsNull(e.value) {
		if cfg.RequireSecondApprover, err = p.boolean(e); err != nil {
			return nil, err
		}
	}
	if e, ok := top["max_iterations"]; ok && !yamlnode.IsNull(e.value) {
		if cfg.MaxIterations, err = p.integer(e); err != nil {
			return nil, err
		}
		if cfg.MaxIterations == 0 {
			// Normalize reads 0 as "not given"; written out it is a mistake.
			return nil, p.Errorf(e.value, "max_iterations must be between 1 and %d, not 0", runtime.MaxIterationsCeiling)
		}
	}
	if e, ok := top["mcp_servers"]; ok {
		if cfg.MCPServers, err = p.mcpServers(e); err != nil {
			return nil, err
		}
	}
	if e, ok := top["tools"]; ok {
		if cfg.Tools, err = p.tools(e, cfg.MCPServers); err != nil {
			return nil, err
		}
	}
	if e, ok := top["tool_policies"]; ok {
		if cfg.ToolPolicies, err = p.policies(e, cfg); err != nil {
			return nil, err
		}
	}
	e, ok := top["provider"]
	if !ok || yamlnode.IsNull(e.value) {
		return nil, p.Errorf(root, "provider is required")
	}
	if err := p.provider(e, cfg); err != nil {
		return nil, err
	}

	if err := cfg.Normalize(); err != nil {
		return nil, p.Errorf(lineOf(err, cfg.Identifier, top, root), "%s", err.Error())
	}
	return cfg, nil
}

// lineOf finds the key a Normalize error is about: its message reads
// "configuration <identifier>: <key> must …".
func lineOf(err error, identifier string, top map[string]entry, root *yaml.Node) *yaml.Node {
	msg := err.Error()
	for _, prefix := range []string{"configuration " + identifier + ": ", "configuration: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	for _, k := range topKeys {
		if e, ok := top[k]; ok && strings.HasPrefix(msg, k+" ") {
			return e.value
		}
	}
	return root
}

func (p *parser) tools(e entry, servers []runtime.MCPServer) ([]string, error) {
	list, err := p.stringList(e)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, name := range list {
		n := yamlnode.Resolve(e.value.Content[i])
		if seen[name] {
			return nil, p.Errorf(n, "tool %q is listed twice", name)
		}
		seen[name] = true
		if server, _, ok := mcp.SplitToolName(name); ok && hasServer(servers, server) {
			return nil, p.Errorf(n, "tool %q belongs to mcp server %s, whose tools are offered without being listed in tools", name, server)
		}
		if p.knownTool != nil && !p.knownTool(name) {
			return nil, p.Errorf(n, "unknown tool %q", name)
		}
	}
	return list, nil
}

// isMCPTool reports whether name can name a tool of one of cfg's MCP
// servers.
func isMCPTool(cfg *runtime.Configuration, name string) bool {
	server, _, ok := mcp.SplitToolName(name)
	if !ok {
		return false
	}
	for _, s := range cfg.MCPServers {
		if s.Name == server {
			return mcp.CanName(s.Name, s.MetaTool, name)
		}
	}
	return false
}

func hasServer(servers []runtime.MCPServer, name string) bool {
	for _, s := range servers {
		if s.Name == name {
			return true
		}
	}
	return false
}

func (p *parser) policies(e entry, cfg *runtime.Configuration) (map[string]runtime.ToolPolicy, error) {
	if yamlnode.IsNull(e.value) {
		return nil, nil
	}
	m, err := p.mapping(e.value, "tool_policies")
	if err != nil {
		return nil, err
	}
	out := map[string]runtime.ToolPolicy{}
	// Walk the document order so that the first bad policy is reported.
	for i := 0; i < len(e.value.Content); i += 2 {
		name := e.value.Content[i].Value
		pe := m[name]
		if !contains(cfg.Tools, name) && !isMCPTool(cfg, name) {
			if server, _, ok := mcp.SplitToolName(name); ok && hasServer(cfg.MCPServers, server) {
				return nil, p.Errorf(pe.key, "tool_policies names %q, which mcp server %s cannot offer", name, server)
			}
			return nil, p.Errorf(pe.key, "tool_policies names %q, which is not in tools (a tool of an mcp server is named <server>__<tool>)", name)
		}
		var pol runtime.ToolPolicy
		if !yamlnode.IsNull(pe.value) {
			fields, err := p.mapping(pe.value, "the policy of "+name, policyKeys...)
			if err != nil {
				return nil, err
			}
			if f, ok := fields["requires_approval"]; ok && !yamlnode.IsNull(f.value) {
				b, err := p.boolean(f)
				if err != nil {
					return nil, err
				}
				pol.RequiresApproval = &b
			}
			if f, ok := fields["grant"]; ok {
				if pol.Grant, err = p.str(f); err != nil {
					return nil, err
				}
			}
		}
		out[name] = pol
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func (p *parser) provider(e entry, cfg *runtime.Configuration) error {
	fields, err := p.mapping(e.value, "provider", providerKeys...)
	if err != nil {
		return err
	}
	spec := &cfg.Provider
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"type", &spec.Type},
		{"model", &spec.Model},
		{"base_url", &spec.BaseURL},
		{"api_key_env", &spec.APIKeyEnv},
	} {
		if fe, ok := fields[f.key]; ok {
			if *f.dst, err = p.str(fe); err != nil {
				return err
			}
		}
	}
	te, ok := fields["type"]
	switch {
	case !ok || spec.Type == "":
		return p.Errorf(e.key, "provider type is required (%s or %s)", ProviderScripted, ProviderOpenAI)
	case spec.Type != ProviderScripted && spec.Type != ProviderOpenAI:
		return p.Errorf(te.value, "provider type must be %s or %s, not %q", ProviderScripted, ProviderOpenAI, spec.Type)
	}
	se, hasScript := fields["script"]
	if hasScript && yamlnode.IsNull(se.value) {
		hasScript = false
	}
	switch {
	case spec.Type == ProviderScripted && !hasScript:
		return p.Errorf(te.value, "the scripted provider needs a script")
	case spec.Type != ProviderScripted && hasScript:
		return p.Errorf(se.key, "a script is only for the scripted provider")
	case !hasScript:
		return nil
	}
	inTools := func(name string) bool { return contains(cfg.Tools, name) || isMCPTool(cfg, name) }
	s, err := scripted.FromNode(string(p.File), se.value, inTools)
	if err != nil {
		return err
	}
	if spec.Script, err = s.JSON(); err != nil {
		return p.Errorf(se.value, "%s", err.Error())
	}
	return nil
}

func (p *parser) mcpServers(e entry) ([]runtime.MCPServer, error) {
	if yamlnode.IsNull(e.value) {
		return nil, nil
	}
	if e.value.Kind != yaml.SequenceNode {
		return nil, p.Errorf(e.value, "mcp_servers must be a list of servers")
	}
	var out []runtime.MCPServer
	first := map[string]int{}
	for _, n := range e.value.Content {
		n = yamlnode.Resolve(n)
		srv, err := p.mcpServer(n)
		if err != nil {
			return nil, err
		}
		if line, ok := first[srv.Name]; ok {
			return nil, p.Errorf(n, "mcp server %q is listed twice (first on line %d)", srv.Name, line)
		}
		first[srv.Name] = n.Line
		out = append(out, srv)
	}
	return out, nil
}

func (p *parser) mcpServer(n *yaml.Node) (runtime.MCPServer, error) {
	var srv runtime.MCPServer
	fields, err := p.mapping(n, "an mcp server", mcpServerKeys...)
	if err != nil {
		return srv, err
	}
	f, ok := fields["name"]
	if ok {
		if srv.Name, err = p.str(f); err != nil {
			return srv, err
		}
	}
	if !ok || srv.Name == "" {
		return srv, p.Errorf(n, "an mcp server needs a name")
	}
	if err := mcp.CheckServerName(srv.Name); err != nil {
		return srv, p.Errorf(f.value, "%s", err.Error())
	}
	f, ok = fields["url"]
	if ok {
		if srv.URL, err = p.str(f); err != nil {
			return srv, err
		}
	}
	if !ok || srv.URL == "" {
		return srv, p.Errorf(n, "mcp server %s needs a url", srv.Name)
	}
	if err := checkURL(srv.URL); err != nil {
		return srv, p.Errorf(f.value, "the url of mcp server %s: %s", srv.Name, err.Error())
	}
	if f, ok := fields["headers"]; ok && !yamlnode.IsNull(f.value) {
		if srv.Headers, err = p.headers(f, srv.Name); err != nil {
			return srv, err
		}
	}
	if f, ok := fields["requires_approval"]; ok && !yamlnode.IsNull(f.value) {
		b, err := p.boolean(f)
		if err != nil {
			return srv, err
		}
		srv.RequiresApproval = &b
	}
	if f, ok := fields["meta_tool"]; ok && !yamlnode.IsNull(f.value) {
		if srv.MetaTool, err = p.boolean(f); err != nil {
			return srv, err
		}
	}
	return srv, nil
}

// checkURL checks a URL that names no environment variable in full; one
// that does is checked when the server is reached.
func checkURL(s string) error {
	if err := mcp.CheckTemplate(s); err != nil {
		return err
	}
	if strings.Contains(s, "${") {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http or https URL", s)
	}
	return nil
}

func (p *parser) headers(e entry, server string) (map[string]string, error) {
	m, err := p.mapping(e.value, "the headers of mcp server "+server)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	seen := map[string]int{}
	for i := 0; i < len(e.value.Content); i += 2 {
		k := e.value.Content[i]
		h := m[k.Value]
		if err := mcp.CheckHeaderName(k.Value); err != nil {
			return nil, p.Errorf(k, "%s", err.Error())
		}
		canonical := strings.ToLower(k.Value)
		if line, ok := seen[canonical]; ok {
			return nil, p.Errorf(k, "header %s is given twice (first on line %d)", k.Value, line)
		}
		seen[canonical] = k.Line
		if yamlnode.IsNull(h.value) || h.value.Kind != yaml.ScalarNode {
			return nil, p.Errorf(h.value, "header %s must be a string", k.Value)
		}
		if err := mcp.CheckTemplate(h.value.Value); err != nil {
			return nil, p.Errorf(h.value, "header %s: %s", k.Value, err.Error())
		}
		out[k.Value] = h.value.Value
	}
	return out, nil
}
