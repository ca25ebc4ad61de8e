package configfile

import (
	"strings"
	"testing"
)

const votes = `identifier: refund-agent
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: lookup_order}]
tools: [lookup_order, refund_order]
approvals_required: 2
tool_policies:
  refund_order: {approvals_required: 3}
`

func TestParseApprovalsRequired(t *testing.T) {
	cfg := mustParse(t, "agent.yaml", votes)
	if cfg.ApprovalsRequired != 2 || cfg.ToolPolicies["refund_order"].ApprovalsRequired != 3 {
		t.Fatalf("approvals_required %d, refund_order's %d; want 2 and 3", cfg.ApprovalsRequired, cfg.ToolPolicies["refund_order"].ApprovalsRequired)
	}
	if got := cfg.Approvals("refund_order"); got != 3 {
		t.Errorf("a refund needs %d approvals, want the policy's 3", got)
	}
	if got := cfg.Approvals("lookup_order"); got != 2 {
		t.Errorf("a lookup needs %d approvals, want the configuration's 2", got)
	}
	// Marshal writes both back.
	out, err := Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again := mustParse(t, "again.yaml", string(out))
	if again.ApprovalsRequired != 2 || again.ToolPolicies["refund_order"].ApprovalsRequired != 3 {
		t.Errorf("Marshal lost approvals_required:\n%s", out)
	}
}

func TestParseApprovalsRequiredErrors(t *testing.T) {
	// Line 8 is approvals_required, line 10 refund_order's policy.
	tests := []struct {
		name string
		line int
		with string
		want string
	}{
		{"zero", 8, "approvals_required: 0", `agent.yaml:8: approvals_required must be between 1 and 50, not 0`},
		{"too many", 8, "approvals_required: 51", `agent.yaml:8: approvals_required must be between 1 and 50, not 51`},
		{"not a number", 8, "approvals_required: two", `agent.yaml:8: approvals_required must be a whole number`},
		{"policy: negative", 10, "  refund_order: {approvals_required: -1}", `agent.yaml:10: approvals_required must be between 1 and 50, not -1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := replaceLine(t, votes, tt.line, tt.with)
			_, err := Parse("agent.yaml", []byte(src), knownTool)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Parse error %v, want one starting %q", err, tt.want)
			}
		})
	}
}
