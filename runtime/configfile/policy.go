package configfile

import (
	"errors"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/internal/yamlnode"
)

var ruleKeys = []string{"name", "when", "then", "reason"}

// policy reads `policy`: the rules that read without an error, each
// expression compiled and type-checked. Every error names its rule by its
// place in the list ("policy rule 2: …"), since its name may be the error.
func (p *parser) policy(e entry) []runtime.Rule {
	if yamlnode.IsNull(e.value) {
		return nil
	}
	if e.value.Kind != yaml.SequenceNode {
		p.fail(e.value, "policy must be a list of rules, each with name, when, then and reason")
		return nil
	}
	var out []runtime.Rule
	first := map[string]int{}
	for i, n := range e.value.Content {
		n = yamlnode.Resolve(n)
		r, ok := p.rule(i+1, n, first)
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// rule reads the n-th rule; ok is false when it has an error. first holds
// the line of each name read so far.
func (p *parser) rule(n int, node *yaml.Node, first map[string]int) (runtime.Rule, bool) {
	var r runtime.Rule
	before := len(p.errs)
	fields, ok := p.mapping(node, p.ruleWhat(n), ruleKeys...)
	if !ok {
		return r, false
	}
	missing := func(key string) {
		if !p.misspelt[node] {
			p.fail(node, "policy rule %d: %s is required", n, key)
		}
	}
	if f, ok := fields["name"]; !ok || yamlnode.IsNull(f.value) {
		missing("name")
	} else if r.Name, ok = p.str(f); ok {
		switch {
		case !runtime.RuleNamePattern.MatchString(r.Name):
			p.fail(f.value, "policy rule %d: name %q must be letters, digits, - and _, at most 64", n, r.Name)
		case first[r.Name] != 0:
			p.fail(f.value, "policy rule %d: name %q is given twice (first on line %d)", n, r.Name, first[r.Name])
		default:
			first[r.Name] = f.value.Line
		}
	}
	if f, ok := fields["reason"]; ok {
		r.Reason, _ = p.str(f)
	}
	if f, ok := fields["then"]; !ok || yamlnode.IsNull(f.value) {
		missing("then")
	} else {
		p.ruleThen(n, f, &r)
	}
	if f, ok := fields["when"]; !ok || yamlnode.IsNull(f.value) {
		missing("when")
	} else if r.When, ok = p.str(f); ok {
		p.ruleWhen(n, f.value, r.When)
	}
	return r, len(p.errs) == before
}

func (p *parser) ruleWhat(n int) string { return "policy rule " + strconv.Itoa(n) }

// ruleThen reads `then`: approve, deny, or a mapping {votes: N}.
func (p *parser) ruleThen(n int, f entry, r *runtime.Rule) {
	const want = "then must be approve, deny or {votes: N}"
	switch f.value.Kind {
	case yaml.ScalarNode:
		switch f.value.Value {
		case runtime.RuleApprove, runtime.RuleDeny:
			r.Then = f.value.Value
		default:
			p.fail(f.value, "policy rule %d: %s, not %q", n, want, f.value.Value)
		}
	case yaml.MappingNode:
		m, ok := p.mapping(f.value, p.ruleWhat(n)+" then", runtime.RuleVotes)
		if !ok {
			return
		}
		v, ok := m[runtime.RuleVotes]
		if !ok {
			if !p.misspelt[f.value] {
				p.fail(f.value, "policy rule %d: %s", n, want)
			}
			return
		}
		if votes, ok := p.integer(v); ok {
			if votes < 2 {
				p.fail(v.value, "policy rule %d: votes must be 2 or more, not %d (one approval is what a call needs anyway)", n, votes)
				return
			}
			r.Then, r.Votes = runtime.RuleVotes, votes
		}
	default:
		p.fail(f.value, "policy rule %d: %s", n, want)
	}
}

// ruleWhen compiles an expression and reports each of its errors on the
// line of the file it is on.
func (p *parser) ruleWhen(n int, node *yaml.Node, when string) {
	_, err := runtime.CompileRule(n-1, when)
	var re *runtime.RuleError
	if !errors.As(err, &re) {
		if err != nil {
			p.fail(node, "policy rule %d: when: %s", n, err.Error())
		}
		return
	}
	for _, is := range re.Errors {
		line := node.Line
		if node.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
			// A block scalar's text starts on the line after its indicator.
			line += is.Line
		} else if node.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) == 0 {
			line += is.Line - 1
		}
		if is.Column == 0 {
			p.fail(&yaml.Node{Line: line}, "policy rule %d: when: %s", n, is.Message)
			continue
		}
		p.fail(&yaml.Node{Line: line}, "policy rule %d: when: %s (column %d of the expression)", n, is.Message, is.Column)
	}
}
