package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Parse reads a script file. Every error names the file and the line:
// YAML syntax, an unknown key, a value of the wrong kind, a bad delay, a
// tool that knownTool does not know (knownTool may be nil: no check), an
// empty script.
func Parse(filename string, data []byte, knownTool func(string) bool) (*Script, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, SyntaxError(filename, data, err)
	}
	return FromNode(filename, &doc, knownTool)
}

var yamlLine = regexp.MustCompile(`^line ([0-9]+): (.*)$`)

// maxSearchLines bounds the search for the line of a syntax error, which
// parses every prefix of the file.
const maxSearchLines = 2000

// SyntaxError rewrites an error of the YAML parser about data as
// "file:line: message"; runtime/config shares it. The parser's own line is
// unreliable (zero-based for some errors, the start of the enclosing block
// for others, absent on the first line), so the line is that of the shortest
// prefix of data that fails with the same message, else the parser's.
func SyntaxError(filename string, data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if l := failingLine(data, msg); l > 0 {
		line = l
	}
	return fmt.Errorf("%s:%d: %s", filename, line, msg)
}

func failingLine(data []byte, msg string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > maxSearchLines {
		return 0
	}
	end := 0
	for i, l := range lines {
		end += len(l)
		var n yaml.Node
		err := yaml.Unmarshal(data[:end], &n)
		if err == nil {
			continue
		}
		got := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLine.FindStringSubmatch(got); m != nil {
			got = m[2]
		}
		if got == msg {
			return i + 1
		}
	}
	return 0
}

// FromNode reads a script from a parsed YAML node: a document or the
// mapping under a configuration's `script:` key. Its errors are those of
// Parse.
func FromNode(filename string, node *yaml.Node, knownTool func(string) bool) (*Script, error) {
	p := parser{file: filename, knownTool: knownTool}
	return p.script(node)
}

type parser struct {
	file      string
	knownTool func(string) bool
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) error {
	line := 1
	if n != nil && n.Line > 0 {
		line = n.Line
	}
	return fmt.Errorf("%s:%d: %s", p.file, line, fmt.Sprintf(format, args...))
}

// resolve follows aliases and steps into a document.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil {
		switch {
		case n.Kind == yaml.AliasNode:
			n = n.Alias
		case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
			n = n.Content[0]
		default:
			return n
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") ||
		(n.Kind == yaml.DocumentNode && len(n.Content) == 0)
}

// fields walks a mapping, rejecting keys outside allowed and keys given twice.
func (p *parser) fields(n *yaml.Node, what string, allowed []string, each func(key, value *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.errorf(n, "%s must be a mapping", what)
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		if first, ok := seen[k.Value]; ok {
			return p.errorf(k, "%q is given twice (first on line %d)", k.Value, first)
		}
		seen[k.Value] = k.Line
		known := false
		for _, a := range allowed {
			known = known || a == k.Value
		}
		if !known {
			return p.errorf(k, "unknown key %q in %s (allowed: %s)", k.Value, what, strings.Join(allowed, ", "))
		}
		if err := each(k, v); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) script(node *yaml.Node) (*Script, error) {
	n := resolve(node)
	if isNull(n) {
		return nil, p.errorf(node, "the script is empty")
	}
	s := &Script{}
	var rounds *yaml.Node
	err := p.fields(n, "the script", []string{"rounds"}, func(_, v *yaml.Node) error {
		rounds = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	if isNull(rounds) {
		return nil, p.errorf(n, "the script has no rounds")
	}
	if rounds.Kind != yaml.SequenceNode {
		return nil, p.errorf(rounds, "rounds must be a list")
	}
	if len(rounds.Content) == 0 {
		return nil, p.errorf(rounds, "the script has no rounds")
	}
	for i, rn := range rounds.Content {
		r, err := p.round(i+1, resolve(rn))
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
	err := p.fields(n, what, []string{"delay", "text", "tool_calls"}, func(k, v *yaml.Node) error {
		if isNull(v) {
			return nil
		}
		switch k.Value {
		case "delay":
			d, err := time.ParseDuration(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil {
				return p.errorf(v, "delay %q is not a duration (write 3s or 500ms)", v.Value)
			}
			if d < 0 {
				return p.errorf(v, "delay must not be negative")
			}
			r.Delay = d
		case "text":
			switch v.Kind {
			case yaml.ScalarNode:
				r.Text = []string{v.Value}
			case yaml.SequenceNode:
				for _, t := range v.Content {
					t = resolve(t)
					if t.Kind != yaml.ScalarNode {
						return p.errorf(t, "text must be a string or a list of strings")
					}
					r.Text = append(r.Text, t.Value)
				}
			default:
				return p.errorf(v, "text must be a string or a list of strings")
			}
		case "tool_calls":
			if v.Kind != yaml.SequenceNode {
				return p.errorf(v, "tool_calls must be a list")
			}
			for j, cn := range v.Content {
				c, err := p.call(fmt.Sprintf("%s, tool call %d", what, j+1), resolve(cn))
				if err != nil {
					return err
				}
				r.ToolCalls = append(r.ToolCalls, c)
			}
		}
		return nil
	})
	return r, err
}

func (p *parser) call(what string, n *yaml.Node) (Call, error) {
	var c Call
	var nameNode *yaml.Node
	err := p.fields(n, what, []string{"name", "arguments"}, func(k, v *yaml.Node) error {
		switch k.Value {
		case "name":
			if v.Kind != yaml.ScalarNode || isNull(v) || v.Value == "" {
				return p.errorf(v, "the tool name must be a string")
			}
			c.Name, nameNode = v.Value, v
		case "arguments":
			if isNull(v) {
				return nil
			}
			if v.Kind != yaml.MappingNode {
				return p.errorf(v, "arguments must be a mapping")
			}
			var m map[string]any
			if err := v.Decode(&m); err != nil {
				return p.errorf(v, "arguments: %s", strings.TrimPrefix(err.Error(), "yaml: "))
			}
			raw, err := json.Marshal(m)
			if err != nil {
				return p.errorf(v, "arguments cannot be written as JSON (keys must be strings)")
			}
			if len(m) == 0 {
				return nil // as FromJSON reads it: omitempty drops {}
			}
			if c.Arguments, err = decodeArguments(raw); err != nil {
				return p.errorf(v, "%s", err.Error())
			}
		}
		return nil
	})
	if err != nil {
		return c, err
	}
	if nameNode == nil {
		return c, p.errorf(n, "%s has no name", what)
	}
	if p.knownTool != nil && !p.knownTool(c.Name) {
		return c, p.errorf(nameNode, "unknown tool %q", c.Name)
	}
	return c, nil
}
