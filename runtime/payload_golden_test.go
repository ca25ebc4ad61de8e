package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// updateGolden rewrites testdata/payloads.golden from what the code records
// now: go test -run TestPayloadGolden ./runtime/ -update-payloads.
var updateGolden = flag.Bool("update-payloads", false, "rewrite testdata/payloads.golden")

// goldenSecret is planted in every piece of run content the cases record,
// with characters json.Marshal escapes, so that a change in how content is
// encoded shows.
const goldenSecret = `SECRET <b>&"x"</b>`

// goldenStore keeps what a continuation commits; it answers the few other
// calls the recording paths make.
type goldenStore struct {
	Store
	events       []Event
	ownerDeleted bool
	resumed      Resumed
}

func (s *goldenStore) Commit(_ context.Context, cm Commit) (bool, error) {
	if cm.Event.Kind != "" {
		s.events = append(s.events, cm.Event)
	}
	return false, nil
}

func (s *goldenStore) OwnerDeleted(context.Context, int64) (bool, error) { return s.ownerDeleted, nil }

func (s *goldenStore) Resume(context.Context, int64, bool) (Resumed, error) { return s.resumed, nil }

// goldenTool is a tool that previews its calls.
type goldenTool struct{ name string }

func (t goldenTool) Spec() ToolSpec {
	return ToolSpec{Name: t.name, Effect: ReadOnly, Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (goldenTool) Call(context.Context, Invocation) (string, error) { return "ok", nil }

func (t goldenTool) Preview(_ context.Context, inv Invocation) (string, error) {
	if inv.CallID == "call_4" {
		return "", errors.New("no preview of " + goldenSecret)
	}
	return "Refund " + goldenSecret + " for " + inv.CallID, nil
}

// goldenProvider answers every round with the same result.
type goldenProvider struct{ res RoundResult }

func (p goldenProvider) Round(context.Context, RoundRequest, func(Delta)) (RoundResult, error) {
	return p.res, nil
}

// goldenSource cannot bring its tools.
type goldenSource struct{}

func (goldenSource) Tools(context.Context, *Configuration) ([]Tool, error) {
	return nil, errors.Join(&UnavailableError{Source: "mcp server crm", Prefix: "crm_", Cause: "the server refused its token (401)"},
		&UnavailableError{Source: "mcp server billing", Prefix: "billing_", Cause: "BILLING_TOKEN is not set"})
}

var goldenCalls = []ToolCall{
	{ID: "call_3", Name: "refund_order", Arguments: json.RawMessage(`{"order_id":"ORD-17","note":"` + strings.ReplaceAll(goldenSecret, `"`, `\"`) +
		`","amount":12.5,"full":true,"none":null,"items":[{"sku":"A","qty":2},"B"]}`)},
	{ID: "call_4", Name: "lookup_order", Arguments: json.RawMessage(`{"order_id":"ORD-18"}`)},
}

// goldenCase drives one recording path of a continuation.
type goldenCase struct {
	name string
	run  func(t *testing.T, c *Continuation, s *goldenStore)
}

func pendingTurn(kind string) *PendingTurn {
	return &PendingTurn{Kind: kind, Calls: goldenCalls}
}

func withPending(c *Continuation, d *DecisionRecord, kind string) {
	c.state.Messages = append(c.state.Messages, Message{Role: "assistant", Content: "calling", ToolCalls: goldenCalls})
	c.state.Pending = pendingTurn(kind)
	d.RunID, d.TurnDigest = c.run.ID, "d1g"
	c.decision = d
}

var goldenCases = []goldenCase{
	{"llm", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.provider = goldenProvider{RoundResult{Text: "I refund it. " + goldenSecret, ToolCalls: goldenCalls,
			Usage: Usage{InputTokens: 187, OutputTokens: 23}}}
		must(t, c.round(context.Background()))
	}},
	{"llm-calls-only", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.provider = goldenProvider{RoundResult{ToolCalls: []ToolCall{{ID: "call_9", Name: "noop"}}}}
		must(t, c.round(context.Background()))
	}},
	{"llm-text-only", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.provider = goldenProvider{RoundResult{Text: "done"}}
		must(t, c.round(context.Background()))
	}},
	{"tool", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.toolResult(context.Background(), goldenCalls[1], `{"order_id":"ORD-18","owner":"`+strings.ReplaceAll(goldenSecret, `"`, `\"`)+`"}`, nil, 4)
	}},
	{"tool-error", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.toolResult(context.Background(), goldenCalls[0], "", errors.New("refused: "+goldenSecret), 0)
	}},
	{"tool-empty", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.toolResult(context.Background(), goldenCalls[1], "", nil, 0)
	}},
	{"suspend-approval", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.suspend(context.Background(), PendingTurn{Kind: TurnApproval, Calls: goldenCalls})
	}},
	{"suspend-note", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.suspend(context.Background(), PendingTurn{Kind: TurnApproval, Calls: goldenCalls[1:], Note: interruptedNote, Attempt: 2})
	}},
	{"suspend-escalated", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.suspend(context.Background(), PendingTurn{Kind: TurnApproval, Calls: []ToolCall{{ID: "call_5", Name: "noop"}}, Escalated: "refunds"})
	}},
	{"suspend-input", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.suspend(context.Background(), PendingTurn{Kind: TurnInput, Calls: []ToolCall{{ID: "call_6", Name: "noop",
			Arguments: json.RawMessage(`{"question":"How much? ` + strings.ReplaceAll(goldenSecret, `"`, `\"`) + `"}`)}},
			Schema: json.RawMessage(`{"type":"object"}`)})
	}},
	{"approval-once", func(t *testing.T, c *Continuation, _ *goldenStore) {
		withPending(c, &DecisionRecord{Kind: DecisionApprove, Scope: ScopeOnce, DeciderName: "olga", Path: "request"}, TurnApproval)
		must(t, c.apply(context.Background()))
	}},
	{"approval-session-edited", func(t *testing.T, c *Continuation, _ *goldenStore) {
		withPending(c, &DecisionRecord{Kind: DecisionApprove, Scope: ScopeSession, DeciderName: "olga", Path: "request",
			Reason: "Alice called; " + goldenSecret,
			Arguments: json.RawMessage(`{"call_3":{"order_id":"ORD-17","amount":5,"note":"edited ` +
				strings.ReplaceAll(goldenSecret, `"`, `\"`) + `"}}`)}, TurnApproval)
		must(t, c.apply(context.Background()))
	}},
	{"approval-deny", func(t *testing.T, c *Continuation, _ *goldenStore) {
		withPending(c, &DecisionRecord{Kind: DecisionDeny, Scope: ScopeOnce, DeciderName: "olga", Reason: "not eligible", Path: "request"}, TurnApproval)
		must(t, c.apply(context.Background()))
	}},
	{"approval-deny-empty", func(t *testing.T, c *Continuation, _ *goldenStore) {
		withPending(c, &DecisionRecord{Kind: DecisionDeny, DeciderName: "", Path: "request"}, TurnApproval)
		must(t, c.apply(context.Background()))
	}},
	{"approval-expired", func(t *testing.T, c *Continuation, _ *goldenStore) {
		withPending(c, &DecisionRecord{Kind: DecisionDeny, Scope: ScopeOnce, Reason: "no decision within 24h0m0s", Path: PathExpiry}, TurnApproval)
		must(t, c.apply(context.Background()))
	}},
	{"input", func(t *testing.T, c *Continuation, _ *goldenStore) {
		withPending(c, &DecisionRecord{Kind: DecisionInput, DeciderName: "olga", Path: "request",
			Input: json.RawMessage(`{"amount":250}`)}, TurnInput)
		c.state.Pending.Calls = goldenCalls[1:]
		must(t, c.apply(context.Background()))
	}},
	{"settle-completed", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.state.Iterations, c.state.Usage = 3, Usage{InputTokens: 600, OutputTokens: 80}
		c.settle(context.Background(), StatusCompleted, ReasonCompleted, "Refunded. "+goldenSecret, "")
	}},
	{"settle-failed", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.settle(context.Background(), StatusFailed, ReasonProviderFailed, "", "provider failed: openai: the model endpoint refused the API key (401)")
	}},
	{"cancel", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.state.Iterations = 2
		c.cancelled(context.Background())
	}},
	{"cancel-owner-deleted", func(t *testing.T, c *Continuation, s *goldenStore) {
		s.ownerDeleted = true
		c.cancelled(context.Background())
	}},
	{"owner-gone", func(t *testing.T, c *Continuation, _ *goldenStore) {
		c.ownerGone(context.Background())
	}},
	{"unavailable", func(t *testing.T, c *Continuation, _ *goldenStore) {
		// execute records what the tool source could not bring, then
		// stops at max_iterations (0): a settle with a detail.
		c.e.source = goldenSource{}
		c.stored = len(c.state.Messages)
		c.execute(context.Background())
	}},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPayloadGolden: every event kind the engine records, at every privacy
// level, is stored as the bytes testdata/payloads.golden holds, and the
// content observers see before the filter too. The file was written by the
// code that built payloads as maps; the typed payloads must keep it.
func TestPayloadGolden(t *testing.T) {
	var b strings.Builder
	for _, gc := range goldenCases {
		for _, level := range []PrivacyLevel{PrivacyMetadata, PrivacyRedacted, PrivacyFull} {
			s := &goldenStore{}
			e := New(Options{Store: s, Tools: map[string]Tool{"noop": goldenTool{"noop"}}})
			cfg := &Configuration{Identifier: "golden", PrivacyLevel: level, Tools: []string{"noop"}}
			c := e.continuation(&Run{ID: 7, OwnerID: 1, ClaimedBy: "p1"}, cfg,
				State{Messages: []Message{{Role: "user", Content: "refund ORD-17"}}, Verdicts: map[string]Verdict{}}, nil)
			c.standing = map[string]bool{}
			c.extra = map[string]Tool{"refund_order": goldenTool{"refund_order"}, "lookup_order": goldenTool{"lookup_order"}}
			var full []string
			c.obs = ObserverFunc(func(st Step) { full = append(full, string(st.Full)) })
			gc.run(t, c, s)
			if len(s.events) == 0 {
				t.Fatalf("%s at %s recorded no event", gc.name, level)
			}
			for i, ev := range s.events {
				fmt.Fprintf(&b, "%s %s %s\n  stored %s\n", gc.name, level, ev.Kind, ev.Payload)
				if i < len(full) {
					fmt.Fprintf(&b, "  full   %s\n", full[i])
				}
			}
		}
	}
	for _, from := range []Status{StatusWaitingForApproval, StatusQueued} {
		for _, name := range []string{"olga", ""} {
			for _, ev := range cancelEvents(Actor{ID: 2, Name: name}, from, 1, 4) {
				fmt.Fprintf(&b, "cancelEvents(%q, %s) #%d %s\n  stored %s\n", name, from, ev.Seq, ev.Kind, ev.Payload)
			}
		}
		for _, ev := range ownerDeletedEvents(from, 1, 4) {
			fmt.Fprintf(&b, "ownerDeletedEvents(%s) #%d %s\n  stored %s\n", from, ev.Seq, ev.Kind, ev.Payload)
		}
	}
	const path = "testdata/payloads.golden"
	if *updateGolden {
		must(t, os.WriteFile(path, []byte(b.String()), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	must(t, err)
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("line %d of %s:\ngot  %s\nwant %s", i+1, path, g, w)
			}
		}
	}
}

// BenchmarkRecordPayload is what building and filtering the payloads of a
// model round and a tool result costs the holder, with the store's commit
// left out: a step's CPU beside its round trip (BenchmarkStepOverhead).
func BenchmarkRecordPayload(b *testing.B) {
	for _, level := range []PrivacyLevel{PrivacyMetadata, PrivacyRedacted, PrivacyFull} {
		b.Run(string(level), func(b *testing.B) {
			s := &goldenStore{}
			e := New(Options{Store: s})
			cfg := &Configuration{Identifier: "golden", PrivacyLevel: level}
			c := e.continuation(&Run{ID: 7, OwnerID: 1, ClaimedBy: "p1"}, cfg, State{Verdicts: map[string]Verdict{}}, nil)
			c.obs = noObserver{}
			c.provider = goldenProvider{RoundResult{Text: "I refund it. " + goldenSecret, ToolCalls: goldenCalls,
				Usage: Usage{InputTokens: 187, OutputTokens: 23}}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				c.state.Messages = []Message{{Role: "user", Content: "refund ORD-17"}}
				c.stored, s.events = 1, s.events[:0]
				if err := c.round(ctx); err != nil {
					b.Fatal(err)
				}
				c.toolResult(ctx, goldenCalls[1], `{"order_id":"ORD-18","amount_cents":4990}`, nil, 0)
			}
		})
	}
}
