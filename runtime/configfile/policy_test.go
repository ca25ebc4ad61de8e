package configfile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

const policyHead = `identifier: refunds
provider: {type: openai, model: m}
tools: [lookup_order, refund_order]
`

const policyRules = policyHead + `policy:
  - name: small-own-refunds
    when: tool == "refund_order" && args.amount < 20 && owner.name == args.owner
    then: approve
    reason: small refunds of the owner's own orders
  - name: big-refunds
    when: |
      tool == "refund_order" &&
        args.amount > 500
    then: {votes: 2}
  - name: no-deletes
    when: tool.startsWith("delete_")
    then: deny
    reason: deletes are not done by agents
`

func TestParsePolicy(t *testing.T) {
	cfg := mustParse(t, "p.yaml", policyRules)
	want := []runtime.Rule{
		{Name: "small-own-refunds", When: `tool == "refund_order" && args.amount < 20 && owner.name == args.owner`,
			Then: runtime.RuleApprove, Reason: "small refunds of the owner's own orders"},
		{Name: "big-refunds", When: "tool == \"refund_order\" &&\n  args.amount > 500\n", Then: runtime.RuleVotes, Votes: 2},
		{Name: "no-deletes", When: `tool.startsWith("delete_")`, Then: runtime.RuleDeny, Reason: "deletes are not done by agents"},
	}
	if !reflect.DeepEqual(cfg.Policy, want) {
		t.Fatalf("policy = %+v\nwant %+v", cfg.Policy, want)
	}
	// Marshal writes what Parse reads back the same.
	out, err := Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again := mustParse(t, "again.yaml", string(out))
	if !reflect.DeepEqual(again.Policy, want) {
		t.Fatalf("after Marshal, policy = %+v\n%s", again.Policy, out)
	}
}

// TestParsePolicyErrors: every error of every rule at once, each with its
// line and its rule's place in the list.
func TestParsePolicyErrors(t *testing.T) {
	src := policyHead + `policy:
  - name: ok
    when: tool == "x"
    then: approve
  - name: ok
    when: args.amount
    then: deny
  - name: "bad name!"
    when: foo == 1 && bar == 2
    then: maybe
  - when: tool == "x"
    then: {votes: 1}
    colour: red
  - name: typo
    when: owner.nmae == "bob"
    then: {votez: 2}
  - name: loops
    when: |
      args.items.exists(i,
        args.items.exists(j, i == j))
    then: deny
  - name: broken
    when: 'tool == '
  - just a string
`
	_, err := Parse("p.yaml", []byte(src), knownTool)
	if err == nil {
		t.Fatal("Parse accepted a broken policy")
	}
	got := strings.Split(err.Error(), "\n")
	want := []string{
		`p.yaml:8: policy rule 2: name "ok" is given twice (first on line 5)`,
		`p.yaml:9: policy rule 2: when: the expression must be true or false (bool), not dyn`,
		`p.yaml:11: policy rule 3: name "bad name!" must be letters, digits, - and _, at most 64`,
		`p.yaml:12: policy rule 3: when: undeclared reference to 'foo' (column 1 of the expression)`,
		`p.yaml:12: policy rule 3: when: undeclared reference to 'bar' (column 13 of the expression)`,
		`p.yaml:13: policy rule 3: then must be approve, deny or {votes: N}, not "maybe"`,
		// Rule 4's missing name is not said: its unknown key may be it.
		`p.yaml:15: policy rule 4: votes must be 2 or more, not 1 (one approval is what a call needs anyway)`,
		`p.yaml:16: unknown key "colour" in policy rule 4 (allowed: name, when, then, reason)`,
		`p.yaml:18: policy rule 5: when: undefined field 'nmae' (column 6 of the expression)`,
		`p.yaml:19: unknown key "votez" in policy rule 5 then (allowed: votes)`,
		`p.yaml:22: policy rule 6: when: the expression may cost up to`,
		`p.yaml:25: policy rule 7: then is required`,
		`p.yaml:26: policy rule 7: when: Syntax error`,
		`p.yaml:27: policy rule 8 must be a mapping`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%s", len(got), len(want), err)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("error %d = %q\nwant prefix %q", i, got[i], want[i])
		}
	}
}
