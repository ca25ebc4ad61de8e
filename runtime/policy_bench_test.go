package runtime

import (
	"fmt"
	"testing"
)

// BenchmarkPolicyPause measures the rules' cost at one pause: a
// configuration of 10 rules, none of which matches (so every one is
// evaluated), asked about the pause's calls, their arguments decoded from
// JSON as a continuation does. Compare with BenchmarkStepOverhead: the
// cost of one recorded step.
func BenchmarkPolicyPause(b *testing.B) {
	var rules []Rule
	for i := range 10 {
		rules = append(rules, Rule{Name: fmt.Sprintf("r%d", i), Then: RuleApprove,
			When: fmt.Sprintf(`tool == "refund_order" && args.amount_cents > %d && args.order_id.startsWith("X-") && "refunds" in owner.grants`, i*1000)})
	}
	cfg := &Configuration{Identifier: "bench", Policy: rules}
	if err := cfg.CompilePolicy(); err != nil {
		b.Fatal(err)
	}
	owner := RuleOwner{Name: "owner", Role: "user", Grants: []string{"approve", "refunds"}}
	for _, calls := range []int{1, 5} {
		b.Run(fmt.Sprintf("calls=%d", calls), func(b *testing.B) {
			args := []byte(`{"order_id": "T-1001", "amount_cents": 5000, "reason": "damaged"}`)
			for b.Loop() {
				for range calls {
					m := cfg.policy().Match(PolicyInput{Tool: "refund_order", Args: policyArgs(args), Owner: owner,
						Configuration: cfg.Identifier, Turn: 1})
					if m.Rule != nil || m.Err != nil {
						b.Fatalf("match = %+v, want none", m)
					}
				}
			}
		})
	}
}
