package scripted

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/turnstile-dev/turnstile/runtime/internal/yamlnode"
)

// Parse reads a script file. Every error names the file and the line:
// YAML syntax, an unknown key, a value of the wrong kind, a bad delay, a
// tool that knownTool does not know (knownTool may be nil: no check), an
// empty script.
func Parse(filename string, data []byte, knownTool func(string) bool) (*Script, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlnode.SyntaxError(filename, data, err)
	}
	return FromNode(filename, &doc, knownTool)
}

// FromNode reads a script from a parsed YAML node: a document or the
// mapping under a configuration's `script:` key. Its errors are those of
// Parse.
func FromNode(filename string, node *yaml.Node, knownTool func(string) bool) (*Script, error) {
	p := parser{File: yamlnode.File(filename), knownTool: knownTool}
	return p.script(node)
}

type parser struct {
	yamlnode.File
	knownTool func(string) bool
}

// fields walks a mapping, rejecting keys outside allowed and keys given twice.
func (p *parser) fields(n *yaml.Node, what string, allowed []string, each func(key, value *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.Errorf(n, "%s must be a mapping", what)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], yamlnode.Resolve(n.Content[i+1])
		if first, ok := seen[k.Value]; ok {
			return p.Errorf(k, "%q is given twice (first on line %d)", k.Value, first)
		}
		seen[k.Value] = k.Line
		known := false
		for _, a := range allowed {
			known = known || a == k.Value
		}
		if !known {
			return p.Errorf(k, "unknown key %q in %s (allowed: %s)", k.Value, what, strings.Join(allowed, ", "))
		}
		if err := each(k, v); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) script(node *yaml.Node) (*Script, error) {
	n := yamlnode.Resolve(node)
	if yamlnode.IsNull(n) {
		return nil, p.Errorf(node, "the script is empty")
	}
	s := &Script{}
	var rounds *yaml.Node
	err := p.fields(n, "the script", []string{"rounds", "title"}, func(k, v *yaml.Node) error {
		if k.Value == "title" {
			if v.Kind != yaml.ScalarNode {
				return p.Errorf(v, "title must be a text: the title the model answers when asked for one")
			}
			s.Title = v.Value
			return nil
		}
		rounds = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	if yamlnode.IsNull(rounds) {
		return nil, p.Errorf(n, "the script has no rounds")
	}
	if rounds.Kind != yaml.SequenceNode {
		return nil, p.Errorf(rounds, "rounds must be a list")
	}
	if len(rounds.Content) == 0 {
		return nil, p.Errorf(rounds, "the script has no rounds")
	}
	for i, rn := range rounds.Content {
		r, err := p.round(i+1, yamlnode.Resolve(rn))
		if err != nil {
			return nil, err
		}
		s.Rounds = append(s.Rounds, r)
	}
	return s, nil
}

func (p *parser) round(num int, n *yaml.Node) (Round, error) {
	var r Round
	what := fmt.Sprintf("round %d", num)
	var textNode *yaml.Node
	err := p.fields(n, what, []string{"delay", "text", "deltas", "tool_calls", "if_denied"}, func(k, v *yaml.Node) error {
		if yamlnode.IsNull(v) {
			return nil
		}
		switch k.Value {
		case "delay":
			d, err := time.ParseDuration(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil {
				return p.Errorf(v, "delay %q is not a duration (write 3s or 500ms)", v.Value)
			}
			if d < 0 {
				return p.Errorf(v, "delay must not be negative")
			}
			r.Delay = d
		case "deltas":
			if textNode != nil {
				return p.Errorf(k, "%s: give text or deltas, not both", what)
			}
			textNode = k
			if v.Kind != yaml.SequenceNode {
				return p.Errorf(v, "deltas must be a list of {text, after}")
			}
			for j, dn := range v.Content {
				d, err := p.delta(fmt.Sprintf("%s, delta %d", what, j+1), yamlnode.Resolve(dn))
				if err != nil {
					return err
				}
				r.Deltas = append(r.Deltas, d)
			}
		case "text":
			if textNode != nil {
				return p.Errorf(k, "%s: give text or deltas, not both", what)
			}
			textNode = k
			switch v.Kind {
			case yaml.ScalarNode:
				r.Text = []string{v.Value}
			case yaml.SequenceNode:
				for _, t := range v.Content {
					t = yamlnode.Resolve(t)
					if t.Kind != yaml.ScalarNode {
						return p.Errorf(t, "text must be a string or a list of strings")
					}
					r.Text = append(r.Text, t.Value)
				}
			default:
				return p.Errorf(v, "text must be a string or a list of strings")
			}
		case "tool_calls":
			if v.Kind != yaml.SequenceNode {
				return p.Errorf(v, "tool_calls must be a list")
			}
			for j, cn := range v.Content {
				c, err := p.call(fmt.Sprintf("%s, tool call %d", what, j+1), yamlnode.Resolve(cn))
				if err != nil {
					return err
				}
				r.ToolCalls = append(r.ToolCalls, c)
			}
		case "if_denied":
			alt, err := p.round(num, v)
			if err != nil {
				return err
			}
			if alt.IfDenied != nil {
				return p.Errorf(v, "%s: if_denied cannot have an if_denied of its own", what)
			}
			r.IfDenied = &alt
		}
		return nil
	})
	return r, err
}

// delta reads one timed piece: {text: "…", after: 250ms, thinking: true}.
func (p *parser) delta(what string, n *yaml.Node) (Delta, error) {
	var d Delta
	seen := false
	err := p.fields(n, what, []string{"text", "after", "thinking"}, func(k, v *yaml.Node) error {
		if v.Kind != yaml.ScalarNode {
			return p.Errorf(v, "%s: %s must be a plain value", what, k.Value)
		}
		switch k.Value {
		case "text":
			d.Text, seen = v.Value, true
		case "after":
			after, err := time.ParseDuration(v.Value)
			if err != nil {
				return p.Errorf(v, "after %q is not a duration (write 250ms)", v.Value)
			}
			if after < 0 {
				return p.Errorf(v, "after must not be negative")
			}
			d.After = after
		case "thinking":
			switch v.Value {
			case "true":
				d.Thinking = true
			case "false":
			default:
				return p.Errorf(v, "thinking must be true or false")
			}
		}
		return nil
	})
	if err == nil && !seen {
		err = p.Errorf(n, "%s has no text", what)
	}
	return d, err
}

func (p *parser) call(what string, n *yaml.Node) (Call, error) {
	var c Call
	var nameNode *yaml.Node
	err := p.fields(n, what, []string{"name", "arguments"}, func(k, v *yaml.Node) error {
		switch k.Value {
		case "name":
			if v.Kind != yaml.ScalarNode || yamlnode.IsNull(v) || v.Value == "" {
				return p.Errorf(v, "the tool name must be a string")
			}
			c.Name, nameNode = v.Value, v
		case "arguments":
			if yamlnode.IsNull(v) {
				return nil
			}
			if v.Kind != yaml.MappingNode {
				return p.Errorf(v, "arguments must be a mapping")
			}
			var m map[string]any
			if err := v.Decode(&m); err != nil {
				return p.Errorf(v, "arguments: %s", strings.TrimPrefix(err.Error(), "yaml: "))
			}
			raw, err := json.Marshal(m)
			if err != nil {
				return p.Errorf(v, "arguments cannot be written as JSON (keys must be strings)")
			}
			if len(m) == 0 {
				return nil // as FromJSON reads it: omitempty drops {}
			}
			if c.Arguments, err = decodeArguments(raw); err != nil {
				return p.Errorf(v, "%s", err.Error())
			}
		}
		return nil
	})
	if err != nil {
		return c, err
	}
	if nameNode == nil {
		return c, p.Errorf(n, "%s has no name", what)
	}
	if p.knownTool != nil && !p.knownTool(c.Name) {
		return c, p.Errorf(nameNode, "unknown tool %q", c.Name)
	}
	return c, nil
}
