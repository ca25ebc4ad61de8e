package runtime

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/cost"
	"cel.dev/cel-go/ext"
)

// Rule is one entry of a configuration's `policy`: when its CEL
// expression holds for a pending call, Then says what becomes of the call
// (the first rule that matches decides; no match leaves it to a person).
type Rule struct {
	Name string `json:"name"`
	// When is a CEL expression over tool, args, owner, configuration and
	// turn (see PolicyInput) whose result is a bool.
	When string `json:"when"`
	// Then is RuleApprove, RuleDeny or RuleVotes (with Votes).
	Then   string `json:"then"`
	Votes  int    `json:"votes,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// What a rule does with a call it matches.
const (
	RuleApprove = "approve"
	RuleDeny    = "deny"
	RuleVotes   = "votes"
)

// PolicyPrefix starts the decider name of a decision a rule made.
const PolicyPrefix = "policy:"

// PolicyDecider is the decider name of a decision a rule made, as every
// surface shows it: "policy:<name>".
func PolicyDecider(rule string) string { return PolicyPrefix + rule }

// RuleNamePattern is what a rule's name must match: short, so that
// "policy:<name>" reads well wherever a decider is shown.
var RuleNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// PolicyCostLimit bounds what one evaluation of a rule may cost, in CEL's
// cost units (about one per operation, one per ten bytes a string function
// reads): an expression whose worst case the estimator puts above it is
// refused when the configuration is applied, and an evaluation that
// reaches it stops and leaves the call to a person.
const PolicyCostLimit = 100_000

// policyMaxSize is what the cost estimator assumes of the size of any
// value a rule reads (a string's bytes, a list's or map's entries): a
// call's arguments are bounded by what a model round returns, far below.
const policyMaxSize = 1 << 12

// RuleOwner is what a rule sees of the run's owner.
type RuleOwner struct {
	Name   string   `cel:"name"`
	Role   string   `cel:"role"`
	Grants []string `cel:"grants"`
}

// PolicyInput is what a rule sees of one pending call: the call's tool
// and arguments, the owner, the configuration's identifier and the
// conversation's turn. Never the transcript, other users or secrets.
type PolicyInput struct {
	Tool          string
	Args          map[string]any
	Owner         RuleOwner
	Configuration string
	Turn          int
}

// policyEnv is the one CEL environment every rule is compiled in.
var policyEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		ext.NativeTypes(reflect.TypeFor[RuleOwner](), ext.ParseStructTags(true)),
		cel.Variable("tool", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("owner", cel.ObjectType("runtime.RuleOwner")),
		cel.Variable("configuration", cel.StringType),
		cel.Variable("turn", cel.IntType),
		// Arguments come from JSON, whose numbers are doubles: a rule
		// writes `args.amount < 20` and means it.
		cel.CrossTypeNumericComparisons(true),
	)
})

// RuleError is what is wrong with one rule's expression: each message
// with the line of the expression it is about (1 for a one-line one).
type RuleError struct {
	Index  int // the rule's place in the list, from 0
	Errors []RuleIssue
}

// RuleIssue is one error of an expression; Column 0 when it is about the
// whole of it.
type RuleIssue struct {
	Line, Column int
	Message      string
}

func (e *RuleError) Error() string {
	msg := fmt.Sprintf("policy rule %d: when: %s", e.Index+1, e.Errors[0].Message)
	for _, i := range e.Errors[1:] {
		msg += "; " + i.Message
	}
	return msg
}

// compiledPolicy is a configuration's rules, compiled once per version of
// the configuration (when it is parsed or read from the store). err is
// why they could not be: then no rule decides anything.
type compiledPolicy struct {
	rules    []Rule
	programs []cel.Program
	err      error
}

// CompileRule type-checks one rule's expression, estimates its cost and
// returns the program; a *RuleError says what is wrong, every error of
// the expression at once.
func CompileRule(index int, when string) (cel.Program, error) {
	env, err := policyEnv()
	if err != nil {
		return nil, fmt.Errorf("runtime: policy environment: %w", err)
	}
	ast, iss := env.Compile(when)
	if iss != nil && iss.Err() != nil {
		re := &RuleError{Index: index}
		for _, e := range iss.Errors() {
			loc := e.Location
			re.Errors = append(re.Errors, RuleIssue{Line: max(loc.Line(), 1), Column: loc.Column() + 1, Message: e.Message})
		}
		return nil, re
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return nil, &RuleError{Index: index, Errors: []RuleIssue{{Line: 1,
			Message: fmt.Sprintf("the expression must be true or false (bool), not %s", ast.OutputType())}}}
	}
	est, err := env.EstimateCost(ast, sizeBound{})
	if err == nil && est.Max > PolicyCostLimit {
		return nil, &RuleError{Index: index, Errors: []RuleIssue{{Line: 1,
			Message: fmt.Sprintf("the expression may cost up to %d, more than the limit of %d (a loop over a loop?)", est.Max, PolicyCostLimit)}}}
	}
	prg, err := env.Program(ast, cel.CostLimit(PolicyCostLimit))
	if err != nil {
		return nil, &RuleError{Index: index, Errors: []RuleIssue{{Line: 1, Message: err.Error()}}}
	}
	return prg, nil
}

// sizeBound tells the cost estimator that no value is larger than
// policyMaxSize, where the expression itself does not say.
type sizeBound struct{}

func (sizeBound) EstimateSize(n cost.AstNode) *cost.SizeEstimate {
	if n.ComputedSize() != nil {
		return nil
	}
	return &cost.SizeEstimate{Min: 0, Max: policyMaxSize}
}

func (sizeBound) EstimateCallCost(string, string, *cost.AstNode, []cost.AstNode) *cost.CallEstimate {
	return nil
}

// CompilePolicy compiles the configuration's rules, once: every process
// that reads a configuration calls it (the store, when it decodes one),
// so that a pause only evaluates. It returns the errors of every rule,
// joined; the configuration keeps them, and then no rule decides a call.
func (c *Configuration) CompilePolicy() error {
	if len(c.Policy) == 0 {
		c.rules = nil // nothing to keep: a configuration without rules compares equal
		return nil
	}
	cp := &compiledPolicy{rules: c.Policy}
	var errs []error
	for i, r := range c.Policy {
		prg, err := CompileRule(i, r.When)
		if err != nil {
			errs = append(errs, err)
		}
		cp.programs = append(cp.programs, prg)
	}
	cp.err = errors.Join(errs...)
	c.rules = cp
	return cp.err
}

// policy returns the compiled rules; a configuration nobody compiled (one
// made in code) is compiled now, and not kept.
func (c *Configuration) policy() *compiledPolicy {
	if c.rules != nil {
		return c.rules
	}
	cp := *c
	_ = cp.CompilePolicy()
	return cp.rules
}

// RuleMatch is what the rules said of one call: the rule that matched, or
// none (Rule nil).
type RuleMatch struct {
	Rule *Rule
	// Err is why a rule's evaluation failed: the call is left to a person.
	Err     error
	ErrRule string
}

// Match evaluates the rules in order for one call; the first that holds
// decides. An evaluation that fails (its cost limit, a key the arguments
// lack, a value of another type) leaves the call to a person: the match
// then carries the error, and no later rule is asked.
func (cp *compiledPolicy) Match(in PolicyInput) RuleMatch {
	if cp == nil || cp.err != nil || len(cp.rules) == 0 {
		return RuleMatch{}
	}
	vars := map[string]any{"tool": in.Tool, "args": in.Args, "owner": in.Owner,
		"configuration": in.Configuration, "turn": in.Turn}
	for i := range cp.rules {
		out, _, err := cp.programs[i].Eval(vars)
		if err != nil {
			return RuleMatch{Err: err, ErrRule: cp.rules[i].Name}
		}
		if b, ok := out.Value().(bool); ok && b {
			return RuleMatch{Rule: &cp.rules[i]}
		}
	}
	return RuleMatch{}
}

// policyArgs decodes a call's arguments for the rules: an object, or an
// empty map when they are not one (a rule asking for a key then fails).
func policyArgs(raw json.RawMessage) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return map[string]any{}
	}
	return m
}
