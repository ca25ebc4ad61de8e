package configfile

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

const deadlines = `identifier: refund-agent
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: lookup_order}]
tools: [lookup_order, refund_order]
decision_timeout: 24h
tool_policies:
  refund_order: {grant: refunds, decision_timeout: 30m, on_timeout: escalate, escalate_grant: refunds-lead}
`

func TestParseDeadlines(t *testing.T) {
	cfg := mustParse(t, "agent.yaml", deadlines)
	if want := (runtime.Deadline{DecisionTimeout: "24h"}); cfg.Deadline != want {
		t.Errorf("deadline = %+v, want %+v", cfg.Deadline, want)
	}
	want := runtime.Deadline{DecisionTimeout: "30m", OnTimeout: "escalate", EscalateGrant: "refunds-lead"}
	if got := cfg.ToolPolicies["refund_order"].Deadline; got != want {
		t.Errorf("refund_order's deadline = %+v, want %+v", got, want)
	}
	out, err := Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if back := mustParse(t, "out.yaml", string(out)); !reflect.DeepEqual(back, cfg) {
		t.Errorf("round trip through\n%s\n got %+v\nwant %+v", out, back, cfg)
	}

	// The shortest timeout of the turn's calls, with its source's action.
	turn := func(names ...string) *runtime.PendingTurn {
		p := &runtime.PendingTurn{Kind: runtime.TurnApproval}
		for _, n := range names {
			p.Calls = append(p.Calls, runtime.ToolCall{ID: n, Name: n})
		}
		return p
	}
	for _, tc := range []struct {
		calls []string
		want  runtime.TurnDeadline
	}{
		{[]string{"lookup_order"}, runtime.TurnDeadline{Timeout: 24 * time.Hour, OnTimeout: "deny"}},
		{[]string{"lookup_order", "refund_order"}, runtime.TurnDeadline{Timeout: 30 * time.Minute, OnTimeout: "escalate", EscalateGrant: "refunds-lead"}},
	} {
		if got := cfg.TurnDeadline(turn(tc.calls...)); got != tc.want {
			t.Errorf("deadline of a turn calling %v = %+v, want %+v", tc.calls, got, tc.want)
		}
	}
	none := mustParse(t, "none.yaml", strings.Replace(deadlines, "decision_timeout: 24h\n", "", 1))
	if got := none.TurnDeadline(turn("lookup_order")); got.Timeout != 0 {
		t.Errorf("a turn without a timeout has deadline %+v", got)
	}
}

func TestParseDeadlineErrors(t *testing.T) {
	// Line 8 is decision_timeout, line 10 refund_order's policy.
	tests := []struct {
		name string
		line int
		with string
		want string
	}{
		{"not a duration", 8, "decision_timeout: tomorrow", `agent.yaml:8: decision_timeout must be a duration such as 30m or 24h, not "tomorrow"`},
		{"no unit", 8, "decision_timeout: 30", `agent.yaml:8: decision_timeout must be a duration such as 30m or 24h, not "30"`},
		{"under a second", 8, "decision_timeout: 500ms", `agent.yaml:8: decision_timeout must be at least 1s, not 500ms`},
		{"negative", 8, "decision_timeout: -1h", `agent.yaml:8: decision_timeout must be at least 1s, not -1h`},
		{"unknown action", 8, "decision_timeout: 1h\non_timeout: approve", `agent.yaml:9: on_timeout must be deny or escalate, not "approve"`},
		{"escalate without a grant", 8, "decision_timeout: 1h\non_timeout: escalate", `agent.yaml:9: escalate_grant is required with on_timeout: escalate`},
		{"a grant without escalate", 8, "decision_timeout: 1h\nescalate_grant: leads", `agent.yaml:9: escalate_grant takes effect only with on_timeout: escalate`},
		{"an action without a timeout", 8, "on_timeout: deny", `agent.yaml:8: on_timeout and escalate_grant take effect only with a decision_timeout`},
		{"policy: not a duration", 10, "  refund_order: {decision_timeout: soon}", `agent.yaml:10: decision_timeout must be a duration`},
		{"policy: escalate without a grant", 10, "  refund_order: {decision_timeout: 1h, on_timeout: escalate}", `agent.yaml:10: escalate_grant is required`},
		{"policy: unknown action", 10, "  refund_order: {decision_timeout: 1h, on_timeout: wait}", `agent.yaml:10: on_timeout must be deny or escalate, not "wait"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := replaceLine(t, deadlines, tt.line, tt.with)
			cfg, err := Parse("agent.yaml", []byte(src), knownTool)
			if err == nil {
				t.Fatalf("Parse: no error for\n%s\nwant %q", src, tt.want)
			}
			if cfg != nil {
				t.Errorf("Parse returned a configuration with its error")
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.want) || strings.Count(got, "\n") != 0 {
				t.Errorf("Parse error:\n got %q\nwant one error starting %q", got, tt.want)
			}
		})
	}
}

// Configurations that reach Normalize another way (stored, or built in
// code) obey the same rules.
func TestNormalizeChecksDeadlines(t *testing.T) {
	cfg := runtime.Configuration{Identifier: "x", Deadline: runtime.Deadline{DecisionTimeout: "1h", OnTimeout: "escalate"}}
	if err := cfg.Normalize(); err == nil || !strings.Contains(err.Error(), "escalate_grant is required") {
		t.Errorf("Normalize = %v, want escalate_grant required", err)
	}
	cfg = runtime.Configuration{Identifier: "x", ToolPolicies: map[string]runtime.ToolPolicy{
		"refund_order": {Deadline: runtime.Deadline{DecisionTimeout: "0s"}}}}
	if err := cfg.Normalize(); err == nil || !strings.Contains(err.Error(), "tool_policies refund_order: decision_timeout must be at least 1s") {
		t.Errorf("Normalize = %v, want the policy's timeout refused", err)
	}
}
