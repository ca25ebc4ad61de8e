package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

func request(round int, prompt string) runtime.RoundRequest {
	return runtime.RoundRequest{Round: round, Messages: []runtime.Message{
		{Role: "system", Content: "You refund orders."},
		{Role: "user", Content: prompt},
		{Role: "assistant", Content: "a later message that is not the prompt"},
	}}
}

// TestFollowUpPlaysTheScriptAgain: a later turn's rounds count from 1
// again and take ${order_id} from the turn's own message, with call ids
// that stay unique in the transcript.
func TestFollowUpPlaysTheScriptAgain(t *testing.T) {
	s := &Script{Rounds: []Round{{ToolCalls: []Call{{Name: "refund_order", Arguments: map[string]any{"order_id": "${order_id}"}}}}}}
	req := request(1, "Refund ORD-1001")
	req.Messages = append(req.Messages, runtime.Message{Role: "user", Content: "now refund ORD-1002 too"})
	res, err := New(s).Round(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.ToolCalls[0].Arguments); got != `{"order_id":"ORD-1002"}` {
		t.Errorf("arguments = %s, want the follow-up's order", got)
	}
	if got := res.ToolCalls[0].ID; got != "call_t2_1_1" {
		t.Errorf("call id = %q, want call_t2_1_1 (turn 2, round 1)", got)
	}
}

func TestRoundSubstitution(t *testing.T) {
	s := &Script{Rounds: []Round{{ToolCalls: []Call{{Name: "lookup_order", Arguments: map[string]any{
		"order_id": "${order_id}",
		"note":     "asked: ${prompt}",
		"deep":     map[string]any{"list": []any{"${order_id}!", json.Number("3"), true}},
	}}}}}}
	tests := []struct {
		name   string
		prompt string
		want   string
	}{
		{"order number in the prompt", "Please refund ORD-1042 and ORD-7", `{"deep":{"list":["ORD-1042!",3,true]},"note":"asked: Please refund ORD-1042 and ORD-7","order_id":"ORD-1042"}`},
		{"whole prompt when nothing matches", "  order 17 \n", `{"deep":{"list":["order 17!",3,true]},"note":"asked:   order 17 \n","order_id":"order 17"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := New(s).Round(context.Background(), request(1, tt.prompt), nil)
			if err != nil {
				t.Fatalf("Round: %v", err)
			}
			if got := string(res.ToolCalls[0].Arguments); got != tt.want {
				t.Errorf("arguments:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
	if got := s.Rounds[0].ToolCalls[0].Arguments["order_id"]; got != "${order_id}" {
		t.Errorf("the script was changed: order_id = %v", got)
	}
}

func TestRoundTextIDsAndUsage(t *testing.T) {
	s := &Script{Rounds: []Round{
		{Text: []string{"Looking ", "up ", "the order."}, ToolCalls: []Call{{Name: "lookup_order"}, {Name: "lookup_customer"}}},
		{Text: []string{"Done."}, ToolCalls: []Call{{Name: "refund_order"}}},
	}}
	p := New(s)
	var deltas []string
	res, err := p.Round(context.Background(), request(1, "ORD-1"), func(d runtime.Delta) { deltas = append(deltas, d.Text) })
	if err != nil {
		t.Fatalf("Round 1: %v", err)
	}
	if len(deltas) != 0 {
		t.Errorf("deltas = %q, want none: text answers whole", deltas)
	}
	if got, want := res.Text, "Looking up the order."; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	res2, err := p.Round(context.Background(), request(2, "ORD-1"), nil)
	if err != nil {
		t.Fatalf("Round 2 with nil onDelta: %v", err)
	}
	var gotIDs []string
	for _, c := range append(res.ToolCalls, res2.ToolCalls...) {
		gotIDs = append(gotIDs, c.ID)
	}
	if want := []string{"call_1_1", "call_1_2", "call_2_1"}; !reflect.DeepEqual(gotIDs, want) {
		t.Errorf("call ids = %q, want %q", gotIDs, want)
	}
	if got, want := string(res.ToolCalls[0].Arguments), "{}"; got != want {
		t.Errorf("arguments without any = %s, want %s", got, want)
	}
	// 18 + 5 + 38 characters of content; 21 characters of text.
	if want := (runtime.Usage{InputTokens: 61 / 4, OutputTokens: 21/4 + 20}); res.Usage != want {
		t.Errorf("Usage = %+v, want %+v", res.Usage, want)
	}
	empty, err := p.Round(context.Background(), runtime.RoundRequest{Round: 2}, nil)
	if err != nil {
		t.Fatalf("Round without messages: %v", err)
	}
	if got, want := empty.Usage.InputTokens, 1; got != want {
		t.Errorf("InputTokens of an empty transcript = %d, want %d", got, want)
	}
}

func TestRoundBeyondScript(t *testing.T) {
	p := New(&Script{Rounds: []Round{{Text: []string{"a"}}, {Text: []string{"b"}}}})
	for _, round := range []int{3, 0} {
		_, err := p.Round(context.Background(), runtime.RoundRequest{Round: round}, nil)
		if got, want := errString(err), "the script has only 2 rounds"; !strings.Contains(got, want) {
			t.Errorf("round %d: error = %q, want it to contain %q", round, got, want)
		}
	}
}

func TestRoundDelay(t *testing.T) {
	p := New(&Script{Rounds: []Round{{Delay: 50 * time.Millisecond, Text: []string{"late"}}}})
	start := time.Now()
	res, err := p.Round(context.Background(), request(1, "x"), nil)
	if err != nil {
		t.Fatalf("Round: %v", err)
	}
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond || res.Text != "late" {
		t.Errorf("Round answered %q after %v, want \"late\" after at least 50ms", res.Text, elapsed)
	}

	slow := New(&Script{Rounds: []Round{{Delay: time.Hour}}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start = time.Now()
	_, err = slow.Round(ctx, request(1, "x"), func(runtime.Delta) { t.Error("onDelta called after cancellation") })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error = %v, want context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Round took %v after its context ended", elapsed)
	}
}

func TestFactory(t *testing.T) {
	raw, err := (&Script{Rounds: []Round{{Text: []string{"hi"}}}}).JSON()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		spec    runtime.ProviderSpec
		wantErr string
	}{
		{"scripted", runtime.ProviderSpec{Type: "scripted", Script: raw}, ""},
		{"other type", runtime.ProviderSpec{Type: "openai"}, `provider type "openai"`},
		{"no script", runtime.ProviderSpec{Type: "scripted"}, "has no script"},
		{"broken script", runtime.ProviderSpec{Type: "scripted", Script: json.RawMessage(`{"rounds":3}`)}, "read script"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Factory(&runtime.Configuration{Identifier: "a", Provider: tt.spec})
			if tt.wantErr != "" {
				if got := errString(err); !strings.Contains(got, tt.wantErr) {
					t.Errorf("error = %q, want it to contain %q", got, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Factory: %v", err)
			}
			res, err := p.Round(context.Background(), runtime.RoundRequest{Round: 1}, nil)
			if err != nil || res.Text != "hi" {
				t.Errorf("Round = %q, %v; want \"hi\"", res.Text, err)
			}
		})
	}
}

// TestRoundIfDenied: a round with if_denied plays it when a person denied
// a call of the model's last message, and the round itself otherwise.
func TestRoundIfDenied(t *testing.T) {
	s := mustParse(t, `rounds:
  - tool_calls: [{name: refund_order}]
  - text: "The refund is done."
    if_denied:
      text: "Nothing was refunded: the refund was denied."
`)
	after := func(result runtime.Message) runtime.RoundRequest {
		req := request(2, "ORD-1")
		req.Messages = append(req.Messages,
			runtime.Message{Role: "assistant", ToolCalls: []runtime.ToolCall{{ID: "call_1_1", Name: "refund_order"}}}, result)
		return req
	}
	for _, tt := range []struct {
		name   string
		result runtime.Message
		want   string
	}{
		{"approved", runtime.Message{Role: "tool", ToolCallID: "call_1_1", Content: `{"refund_id":1}`}, "The refund is done."},
		{"denied", runtime.Message{Role: "tool", ToolCallID: "call_1_1", Content: runtime.DeniedPrefix + "operator: no", IsError: true}, "Nothing was refunded: the refund was denied."},
		{"failed, not denied", runtime.Message{Role: "tool", ToolCallID: "call_1_1", Content: "error: no such order", IsError: true}, "The refund is done."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := New(s).Round(context.Background(), after(tt.result), nil)
			if err != nil || res.Text != tt.want {
				t.Errorf("Round = %q, %v; want %q", res.Text, err, tt.want)
			}
		})
	}
	// It survives the trip through JSON, as configurations store scripts.
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromJSON(b)
	if err != nil || !reflect.DeepEqual(back, s) {
		t.Errorf("FromJSON(Marshal) = %+v, %v; want %+v", back, err, s)
	}
	if _, err := Parse("x.yaml", []byte("rounds:\n  - if_denied: {if_denied: {text: x}}\n"), nil); err == nil || !strings.Contains(err.Error(), "if_denied of its own") {
		t.Errorf("nested if_denied: %v, want refused", err)
	}
}

func TestRoundStreamsTimedDeltas(t *testing.T) {
	s := &Script{Rounds: []Round{{Deltas: []Delta{
		{Text: "Hmm. ", Thinking: true},
		{Text: "Refunding ", After: 60 * time.Millisecond},
		{Text: "now.", After: 60 * time.Millisecond},
	}}}}
	start := time.Now()
	type got struct {
		d  runtime.Delta
		at time.Duration
	}
	var seen []got
	res, err := New(s).Round(context.Background(), request(1, "x"), func(d runtime.Delta) {
		seen = append(seen, got{d, time.Since(start)})
	})
	if err != nil {
		t.Fatalf("Round: %v", err)
	}
	if res.Text != "Refunding now." || res.Thinking != "Hmm. " {
		t.Errorf("Text %q, Thinking %q; want the answer's pieces and the thinking's apart", res.Text, res.Thinking)
	}
	if len(seen) != 3 || !seen[0].d.Thinking || seen[1].d.Thinking || seen[2].d.Text != "now." {
		t.Fatalf("deltas = %+v", seen)
	}
	// Each after counts from the piece before: 60 ms, then 120 ms.
	if seen[1].at < 60*time.Millisecond || seen[2].at < 120*time.Millisecond || seen[2].at-seen[1].at < 60*time.Millisecond {
		t.Errorf("pieces at %v, %v, %v: want the second after 60 ms and the third 60 ms after it", seen[0].at, seen[1].at, seen[2].at)
	}
	ctx, cancel := context.WithCancel(context.Background())
	_, err = New(s).Round(ctx, request(1, "x"), func(d runtime.Delta) {
		if d.Thinking {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Round cancelled between deltas: %v, want context.Canceled", err)
	}
}
