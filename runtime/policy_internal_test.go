package runtime

import (
	"strings"
	"testing"
)

// A rule whose evaluation runs past the cost limit is stopped: the
// estimate passed (it assumes values of a bounded size), the arguments
// are larger.
func TestRuleEvaluationStopsAtTheCostLimit(t *testing.T) {
	cfg := &Configuration{Policy: []Rule{{Name: "scan", When: `args.items.exists(i, i.startsWith("zzz"))`, Then: RuleApprove}}}
	if err := cfg.CompilePolicy(); err != nil {
		t.Fatalf("CompilePolicy: %v", err)
	}
	items := make([]any, 200_000)
	for i := range items {
		items[i] = "item"
	}
	m := cfg.policy().Match(PolicyInput{Tool: "t", Args: map[string]any{"items": items}})
	if m.Rule != nil || m.Err == nil || !strings.Contains(m.Err.Error(), "cost limit") || m.ErrRule != "scan" {
		t.Fatalf("Match = %+v, want the cost limit's error from rule scan", m)
	}
	// The same rule on arguments of a usual size matches nothing and costs
	// little.
	if m := cfg.policy().Match(PolicyInput{Tool: "t", Args: map[string]any{"items": []any{"a", "zzz1"}}}); m.Rule == nil || m.Err != nil {
		t.Fatalf("Match on two items = %+v, want the rule", m)
	}
}

// A configuration whose rules do not compile (a definition written by a
// newer process, say) keeps working: no rule decides anything.
func TestPolicyThatDoesNotCompileDecidesNothing(t *testing.T) {
	cfg := &Configuration{Policy: []Rule{{Name: "future", When: `future_variable == 1`, Then: RuleApprove}}}
	if err := cfg.CompilePolicy(); err == nil {
		t.Fatal("CompilePolicy accepted an undeclared variable")
	}
	if m := cfg.policy().Match(PolicyInput{Tool: "t", Args: map[string]any{}}); m.Rule != nil {
		t.Fatalf("Match = %+v, want no rule", m)
	}
}
