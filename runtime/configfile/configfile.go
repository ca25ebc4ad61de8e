// Package configfile reads and writes agent configuration files: the YAML that
// `turnstile config apply` takes and the demo configurations embedded in the
// binary. Every error it reports points at a line of the file.
package configfile

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
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
// calls must name tools of `tools`), a malformed `mcp_servers` or `notify`
// entry (see runtime.Notify.Check), and the rules of
// runtime.Configuration.Normalize.
//
// Parse reports every error of the file at once: a file with several is an
// errors.Join of them (Unwrap() []error), sorted by line, so its message is
// one "file:line: message" per line. A YAML syntax error stops the reading
// and comes alone, and so does the first error of an inline script; a part
// of the file that is unusable (tools that are no list, a broken
// mcp_servers entry) turns off the checks that would only repeat it (the
// script's calls and the tool policies checked against it).
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
	cfg := p.configuration(&doc)
	if err := p.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

type parser struct {
	yamlnode.File
	knownTool func(string) bool
	errs      []lineError
	// anyMCPTool is set when mcp_servers has an error: a server may be
	// missing from the list, so any "<server>__<tool>" name passes.
	anyMCPTool bool
	// misspelt holds the mappings with an unknown key, which may be a
	// required key misspelt: a missing key of theirs is not reported
	// again.
	misspelt map[*yaml.Node]bool
}

// lineError is one error of the file and the line it is about.
type lineError struct {
	line int
	err  error
}

// fail records an error about n, as "file:line: message", and lets the
// parser go on.
func (p *parser) fail(n *yaml.Node, format string, args ...any) {
	line := 1 // as yamlnode.File.Errorf
	if n != nil && n.Line > 0 {
		line = n.Line
	}
	p.errs = append(p.errs, lineError{line, p.Errorf(n, format, args...)})
}

// failWith records an error that already names its file and line (the
// script parser's).
func (p *parser) failWith(err error) {
	line := 0
	if rest, ok := strings.CutPrefix(err.Error(), string(p.File)+":"); ok {
		digits, _, _ := strings.Cut(rest, ":")
		line, _ = strconv.Atoi(digits)
	}
	p.errs = append(p.errs, lineError{line, err})
}

// err is nil, the one error, or every error joined in line order (errors
// on one line in the order they were found).
func (p *parser) err() error {
	switch len(p.errs) {
	case 0:
		return nil
	case 1:
		return p.errs[0].err
	}
	sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].line < p.errs[j].line })
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e.err
	}
	return errors.Join(errs...)
}

// entry is one key of a mapping and its value.
type entry struct{ key, value *yaml.Node }

// mapping returns the entries of a mapping by key. A key outside allowed
// is an error and left out, and so is a key given again (the first one
// counts); ok is false when n is no mapping at all.
func (p *parser) mapping(n *yaml.Node, what string, allowed ...string) (m map[string]entry, ok bool) {
	if n.Kind != yaml.MappingNode {
		p.fail(n, "%s must be a mapping", what)
		return nil, false
	}
	out := map[string]entry{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], yamlnode.Resolve(n.Content[i+1])
		if first, ok := out[k.Value]; ok {
			p.fail(k, "%q is given twice (first on line %d)", k.Value, first.key.Line)
			continue
		}
		if allowed != nil && !contains(allowed, k.Value) {
			p.fail(k, "unknown key %q in %s (allowed: %s)", k.Value, what, strings.Join(allowed, ", "))
			if p.misspelt == nil {
				p.misspelt = map[*yaml.Node]bool{}
			}
			p.misspelt[n] = true
			continue
		}
		out[k.Value] = entry{k, v}
	}
	return out, true
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
func (p *parser) str(e entry) (string, bool) {
	if yamlnode.IsNull(e.value) {
		return "", true
	}
	if e.value.Kind != yaml.ScalarNode {
		p.fail(e.value, "%s must be a string", e.key.Value)
		return "", false
	}
	return e.value.Value, true
}

func (p *parser) boolean(e entry) (bool, bool) {
	var b bool
	if e.value.Kind != yaml.ScalarNode || e.value.Tag != "!!bool" || e.value.Decode(&b) != nil {
		p.fail(e.value, "%s must be true or false", e.key.Value)
		return false, false
	}
	return b, true
}

func (p *parser) integer(e entry) (int, bool) {
	var i int
	if e.value.Kind != yaml.ScalarNode || e.value.Tag != "!!int" || e.value.Decode(&i) != nil {
		p.fail(e.value, "%s must be a whole number", e.key.Value)
		return 0, false
	}
	return i, true
}

// stringList reads a list of strings with their nodes; an element that is
// no string is an error and left out, and ok is false when the value is no
// list at all.
func (p *parser) stringList(e entry) (list []string, nodes []*yaml.Node, ok bool) {
	list = []string{}
	if yamlnode.IsNull(e.value) {
		return list, nil, true
	}
	if e.value.Kind != yaml.SequenceNode {
		p.fail(e.value, "%s must be a list of strings", e.key.Value)
		return nil, nil, false
	}
	for _, n := range e.value.Content {
		n = yamlnode.Resolve(n)
		if n.Kind != yaml.ScalarNode || yamlnode.IsNull(n) || n.Value == "" {
			p.fail(n, "%s must be a list of strings", e.key.Value)
			continue
		}
		list, nodes = append(list, n.Value), append(nodes, n)
	}
	return list, nodes, true
}

var topKeys = []string{
	"identifier", "name", "description", "active", "provider", "system_prompt", "title", "tools",
	"max_iterations", "require_second_approver", "approvals_required", "privacy_level", "tool_policies",
	"mcp_servers", "decision_timeout", "on_timeout", "escalate_grant", "notify", "identity_ttl", "policy",
}

var mcpServerKeys = []string{"name", "url", "headers", "requires_approval", "meta_tool", "identity"}

var providerKeys = []string{"type", "model", "base_url", "api_key_env", "script"}

var policyKeys = []string{"requires_approval", "grant", "approvals_required", "decision_timeout", "on_timeout", "escalate_grant"}

// configuration reads the document; what it returns counts only when no
// error was recorded.
func (p *parser) configuration(doc *yaml.Node) *runtime.Configuration {
	root := yamlnode.Resolve(doc)
	if yamlnode.IsNull(root) {
		p.fail(doc, "the configuration is empty")
		return nil
	}
	top, ok := p.mapping(root, "the configuration", topKeys...)
	if !ok {
		return nil
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
		{"description", &cfg.Description},
		{"system_prompt", &cfg.SystemPrompt},
		{"title", &cfg.Title},
		{"privacy_level", (*string)(&cfg.PrivacyLevel)},
		{"identity_ttl", &cfg.IdentityTTL},
	} {
		if e, ok := top[f.key]; ok {
			*f.dst, _ = p.str(e)
		}
	}
	if e, ok := top["identifier"]; !ok || cfg.Identifier == "" {
		at := root
		if ok {
			at = e.key
		}
		if (!ok && !p.misspelt[root]) || (ok && e.value.Kind == yaml.ScalarNode) { // else said already
			p.fail(at, "identifier is required")
		}
	} else if !identifierPattern.MatchString(cfg.Identifier) {
		p.fail(e.value, "identifier %q must be lower-case letters, digits and dashes, starting with a letter or digit, at most 100 characters", cfg.Identifier)
	}
	if err := cfg.CheckIdentityTTL(); err != nil {
		p.fail(top["identity_ttl"].value, "%s", err.Error())
		cfg.IdentityTTL = "" // said here, with the line: not again by Normalize
	}
	if e, ok := top["active"]; ok && !yamlnode.IsNull(e.value) {
		cfg.Active, _ = p.boolean(e)
	}
	if e, ok := top["require_second_approver"]; ok && !yamlnode.IsNull(e.value) {
		cfg.RequireSecondApprover, _ = p.boolean(e)
	}
	cfg.ApprovalsRequired = p.approvals(top)
	if e, ok := top["max_iterations"]; ok && !yamlnode.IsNull(e.value) {
		if cfg.MaxIterations, ok = p.integer(e); ok && cfg.MaxIterations == 0 {
			// Normalize reads 0 as "not given"; written out it is a mistake.
			p.fail(e.value, "max_iterations must be between 1 and %d, not 0", runtime.MaxIterationsCeiling)
		}
	}
	cfg.Deadline = p.deadline(top)
	if e, ok := top["mcp_servers"]; ok {
		cfg.MCPServers = p.mcpServers(e)
	}
	if e, ok := top["notify"]; ok {
		cfg.Notify = p.notify(e)
	}
	// toolsKnown is false when `tools` is unusable: nothing is then checked
	// against it.
	toolsKnown := true
	if e, ok := top["tools"]; ok {
		cfg.Tools, toolsKnown = p.tools(e, cfg.MCPServers)
	}
	if e, ok := top["tool_policies"]; ok {
		cfg.ToolPolicies = p.policies(e, cfg, toolsKnown)
	}
	if e, ok := top["policy"]; ok {
		cfg.Policy = p.policy(e)
	}
	if e, ok := top["provider"]; (!ok && !p.misspelt[root]) || (ok && yamlnode.IsNull(e.value)) {
		p.fail(root, "provider is required")
	} else if ok {
		p.provider(e, cfg, toolsKnown)
	}

	// Normalize checks what needs the identifier, which names the
	// configuration in its messages.
	if cfg.Identifier != "" {
		if err := cfg.Normalize(); err != nil {
			p.fail(lineOf(err, cfg.Identifier, top, root), "%s", err.Error())
		}
	}
	return cfg
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

// tools reads `tools`: every name as written, for the checks that follow,
// and whether the value was a list at all.
func (p *parser) tools(e entry, servers []runtime.MCPServer) ([]string, bool) {
	list, nodes, ok := p.stringList(e)
	if !ok {
		return []string{}, false
	}
	seen := map[string]bool{}
	for i, name := range list {
		n := nodes[i]
		if seen[name] {
			p.fail(n, "tool %q is listed twice", name)
			continue
		}
		seen[name] = true
		if server, _, ok := mcp.SplitToolName(name); ok && hasServer(servers, server) {
			p.fail(n, "tool %q belongs to mcp server %s, whose tools are offered without being listed in tools", name, server)
			continue
		}
		if p.knownTool != nil && !p.knownTool(name) {
			p.fail(n, "unknown tool %q", name)
		}
	}
	return list, true
}

// isMCPTool reports whether name can name a tool of one of cfg's MCP
// servers (any "<server>__<tool>" when mcp_servers has an error).
func (p *parser) isMCPTool(cfg *runtime.Configuration, name string) bool {
	server, _, ok := mcp.SplitToolName(name)
	if !ok {
		return false
	}
	if p.anyMCPTool {
		return true
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

// policies reads `tool_policies`; toolsKnown false skips the check that
// each names a tool of the configuration.
func (p *parser) policies(e entry, cfg *runtime.Configuration, toolsKnown bool) map[string]runtime.ToolPolicy {
	if yamlnode.IsNull(e.value) {
		return nil
	}
	m, ok := p.mapping(e.value, "tool_policies")
	if !ok {
		return nil
	}
	out := map[string]runtime.ToolPolicy{}
	// Walk the document order; a key given twice was reported by mapping.
	for i := 0; i < len(e.value.Content); i += 2 {
		name := e.value.Content[i].Value
		pe := m[name]
		if pe.key != e.value.Content[i] {
			continue
		}
		if toolsKnown && !contains(cfg.Tools, name) && !p.isMCPTool(cfg, name) {
			if server, _, ok := mcp.SplitToolName(name); ok && hasServer(cfg.MCPServers, server) {
				p.fail(pe.key, "tool_policies names %q, which mcp server %s cannot offer", name, server)
			} else {
				p.fail(pe.key, "tool_policies names %q, which is not in tools (a tool of an mcp server is named <server>__<tool>)", name)
			}
			continue
		}
		var pol runtime.ToolPolicy
		if !yamlnode.IsNull(pe.value) {
			fields, ok := p.mapping(pe.value, "the policy of "+name, policyKeys...)
			if !ok {
				continue
			}
			if f, ok := fields["requires_approval"]; ok && !yamlnode.IsNull(f.value) {
				if b, ok := p.boolean(f); ok {
					pol.RequiresApproval = &b
				}
			}
			if f, ok := fields["grant"]; ok {
				pol.Grant, _ = p.str(f)
			}
			pol.ApprovalsRequired = p.approvals(fields)
			pol.Deadline = p.deadline(fields)
		}
		out[name] = pol
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// approvals reads `approvals_required` of the configuration or of a
// tool's policy: a whole number from 1 to runtime.MaxApprovals, 0 when
// not given.
func (p *parser) approvals(fields map[string]entry) int {
	e, ok := fields["approvals_required"]
	if !ok || yamlnode.IsNull(e.value) {
		return 0
	}
	n, ok := p.integer(e)
	if ok && (n < 1 || n > runtime.MaxApprovals) {
		p.fail(e.value, "approvals_required must be between 1 and %d, not %d", runtime.MaxApprovals, n)
		return 0
	}
	return n
}

// provider reads `provider` into cfg; toolsKnown false leaves the
// script's calls unchecked.
func (p *parser) provider(e entry, cfg *runtime.Configuration, toolsKnown bool) {
	fields, ok := p.mapping(e.value, "provider", providerKeys...)
	if !ok {
		return
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
			*f.dst, _ = p.str(fe)
		}
	}
	if fe, ok := fields["api_key_env"]; ok && spec.APIKeyEnv != "" {
		if err := runtime.CheckEnvName(spec.APIKeyEnv); err != nil {
			p.fail(fe.value, "provider api_key_env: %s", err.Error())
			spec.APIKeyEnv = "" // said here, with the line: not again by Normalize
		}
	}
	se, hasScript := fields["script"]
	if hasScript && yamlnode.IsNull(se.value) {
		hasScript = false
	}
	te, ok := fields["type"]
	switch {
	case !ok || spec.Type == "":
		if (!ok && !p.misspelt[e.value]) || (ok && te.value.Kind == yaml.ScalarNode) { // else said already
			p.fail(e.key, "provider type is required (%s or %s)", ProviderScripted, ProviderOpenAI)
		}
	case spec.Type != ProviderScripted && spec.Type != ProviderOpenAI:
		p.fail(te.value, "provider type must be %s or %s, not %q", ProviderScripted, ProviderOpenAI, spec.Type)
	case spec.Type == ProviderScripted && !hasScript:
		p.fail(te.value, "the scripted provider needs a script")
	case spec.Type != ProviderScripted && hasScript:
		p.fail(se.key, "a script is only for the scripted provider")
		return
	}
	if !hasScript {
		return
	}
	var inTools func(string) bool // nil: no check
	if toolsKnown {
		inTools = func(name string) bool { return contains(cfg.Tools, name) || p.isMCPTool(cfg, name) }
	}
	s, err := scripted.FromNode(string(p.File), se.value, inTools)
	if err != nil {
		p.failWith(err)
		return
	}
	if spec.Script, err = s.JSON(); err != nil {
		p.fail(se.value, "%s", err.Error())
	}
}

// mcpServers reads `mcp_servers`: the entries that read without an error.
// Any error makes every "<server>__<tool>" name pass the later checks,
// since the server it names may be the broken entry.
func (p *parser) mcpServers(e entry) []runtime.MCPServer {
	if yamlnode.IsNull(e.value) {
		return nil
	}
	before := len(p.errs)
	defer func() { p.anyMCPTool = p.anyMCPTool || len(p.errs) > before }()
	if e.value.Kind != yaml.SequenceNode {
		p.fail(e.value, "mcp_servers must be a list of servers")
		return nil
	}
	var out []runtime.MCPServer
	first := map[string]int{}
	for _, n := range e.value.Content {
		n = yamlnode.Resolve(n)
		srv, ok := p.mcpServer(n)
		if !ok {
			continue
		}
		if line, ok := first[srv.Name]; ok {
			p.fail(n, "mcp server %q is listed twice (first on line %d)", srv.Name, line)
			continue
		}
		first[srv.Name] = n.Line
		out = append(out, srv)
	}
	return out
}

// mcpServer reads one entry of `mcp_servers`; ok is false when it has an
// error.
func (p *parser) mcpServer(n *yaml.Node) (runtime.MCPServer, bool) {
	var srv runtime.MCPServer
	before := len(p.errs)
	fields, ok := p.mapping(n, "an mcp server", mcpServerKeys...)
	if !ok {
		return srv, false
	}
	f, ok := fields["name"]
	if ok {
		srv.Name, _ = p.str(f)
	}
	switch {
	case !ok || srv.Name == "":
		if (!ok && !p.misspelt[n]) || (ok && f.value.Kind == yaml.ScalarNode) {
			p.fail(n, "an mcp server needs a name")
		}
		srv.Name = "" // the url's message below names no server then
	default:
		if err := mcp.CheckServerName(srv.Name); err != nil {
			p.fail(f.value, "%s", err.Error())
		}
	}
	f, ok = fields["url"]
	if ok {
		srv.URL, _ = p.str(f)
	}
	switch {
	case !ok || srv.URL == "":
		switch {
		case ok && f.value.Kind != yaml.ScalarNode, !ok && p.misspelt[n]: // said already
		case srv.Name == "":
			p.fail(n, "an mcp server needs a url")
		default:
			p.fail(n, "mcp server %s needs a url", srv.Name)
		}
	default:
		if err := checkURL(srv.URL); err != nil {
			p.fail(f.value, "the url of mcp server %s: %s", srv.Name, err.Error())
		}
	}
	if f, ok := fields["headers"]; ok && !yamlnode.IsNull(f.value) {
		srv.Headers = p.headers(f, srv.Name)
	}
	if f, ok := fields["requires_approval"]; ok && !yamlnode.IsNull(f.value) {
		if b, ok := p.boolean(f); ok {
			srv.RequiresApproval = &b
		}
	}
	if f, ok := fields["meta_tool"]; ok && !yamlnode.IsNull(f.value) {
		srv.MetaTool, _ = p.boolean(f)
	}
	if f, ok := fields["identity"]; ok && !yamlnode.IsNull(f.value) {
		srv.Identity, _ = p.str(f)
		if err := srv.CheckIdentity(); err != nil {
			p.fail(f.value, "%s", err.Error())
			srv.Identity = "" // said here, with the line: not again by Normalize
		}
	}
	return srv, len(p.errs) == before
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

func (p *parser) headers(e entry, server string) map[string]string {
	m, ok := p.mapping(e.value, "the headers of mcp server "+server)
	if !ok {
		return nil
	}
	out := map[string]string{}
	seen := map[string]int{}
	for i := 0; i < len(e.value.Content); i += 2 {
		k := e.value.Content[i]
		h := m[k.Value]
		if h.key != k {
			continue // given twice: mapping said so
		}
		if err := mcp.CheckHeaderName(k.Value); err != nil {
			p.fail(k, "%s", err.Error())
			continue
		}
		canonical := strings.ToLower(k.Value)
		if line, ok := seen[canonical]; ok {
			p.fail(k, "header %s is given twice (first on line %d)", k.Value, line)
			continue
		}
		seen[canonical] = k.Line
		if yamlnode.IsNull(h.value) || h.value.Kind != yaml.ScalarNode {
			p.fail(h.value, "header %s must be a string", k.Value)
			continue
		}
		if err := mcp.CheckTemplate(h.value.Value); err != nil {
			p.fail(h.value, "header %s: %s", k.Value, err.Error())
			continue
		}
		out[k.Value] = h.value.Value
	}
	return out
}
