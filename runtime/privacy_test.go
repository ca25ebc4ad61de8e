package runtime

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// marker is planted in every piece of content; where it shows up, content
// leaked.
const marker = "SECRET-7f3a"

// Content as a provider round and a suspension carry it.
var (
	markerArgs = json.RawMessage(`{"order_id":"ORD-` + marker + `","amount":12.5,"full":true,"note":null,` +
		`"items":[{"sku":"` + marker + `","qty":2},"` + marker + `"]}`)
	markerText = "Refunding it now, " + marker + "."
)

// testRound is shaped like the payloads the continuation records: tool
// calls as a list of structs, content beside metadata, a nested struct.
type testRound struct {
	TurnKind  string        `json:"kind"`
	Digest    string        `json:"digest"`
	Text      Content       `json:"text"`
	Usage     Usage         `json:"usage"`
	ToolCalls []CallPayload `json:"tool_calls"`
	Result    testResult    `json:"result"`
}

type testResult struct {
	Tool   string  `json:"tool"`
	Output Content `json:"output"`
}

func (testRound) Kind() EventKind { return KindLLM }

// testArguments is a payload of arguments alone.
type testArguments struct {
	Arguments Content `json:"arguments"`
}

func (testArguments) Kind() EventKind { return KindTool }

func roundPayload() testRound {
	return testRound{
		TurnKind: TurnApproval,
		Digest:   "d1g3st",
		Text:     Content{Value: markerText},
		Usage:    Usage{InputTokens: 10, OutputTokens: 3},
		ToolCalls: []CallPayload{
			{ID: "call_1", Name: "refund_order", Arguments: Content{Value: markerArgs}},
			{ID: "call_2", Name: "lookup_order", Arguments: Content{Value: json.RawMessage(`{"order_id":"` + marker + `"}`)}},
		},
		Result: testResult{Tool: "lookup_order", Output: Content{Value: marker}},
	}
}

// filtered renders the payload at a level and decodes it back.
func filtered(t *testing.T, level PrivacyLevel) (raw string, got map[string]any) {
	t.Helper()
	b := filter(level, roundPayload())
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("filter(%s) = %s, not a JSON object: %v", level, b, err)
	}
	return string(b), got
}

func TestFilterMarkerOnlyAtFull(t *testing.T) {
	tests := []struct {
		level      PrivacyLevel
		wantMarker bool
	}{
		{PrivacyMetadata, false},
		{PrivacyRedacted, false},
		{PrivacyFull, true},
	}
	for _, tt := range tests {
		t.Run(string(tt.level), func(t *testing.T) {
			raw, _ := filtered(t, tt.level)
			if got := strings.Contains(raw, marker); got != tt.wantMarker {
				t.Errorf("filter(%s) = %s; contains %q = %v, want %v", tt.level, raw, marker, got, tt.wantMarker)
			}
		})
	}
}

func TestFilterMetadata(t *testing.T) {
	raw, got := filtered(t, PrivacyMetadata)
	want := map[string]any{
		"kind":       "approval",
		"digest":     "d1g3st",
		"text_bytes": float64(len(markerText)),
		"usage":      map[string]any{"input_tokens": float64(10), "output_tokens": float64(3)},
		"tool_calls": []any{
			map[string]any{"id": "call_1", "name": "refund_order", "arguments_bytes": float64(len(markerArgs))},
			map[string]any{"id": "call_2", "name": "lookup_order", "arguments_bytes": float64(len(`{"order_id":"` + marker + `"}`))},
		},
		"result": map[string]any{"tool": "lookup_order", "output_bytes": float64(len(marker))},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("filter(metadata) = %s\nwant %#v", raw, want)
	}
}

func TestFilterRedacted(t *testing.T) {
	raw, got := filtered(t, PrivacyRedacted)
	const r = "[redacted]"
	want := map[string]any{
		"kind":   "approval",
		"digest": "d1g3st",
		"text":   r,
		"usage":  map[string]any{"input_tokens": float64(10), "output_tokens": float64(3)},
		"tool_calls": []any{
			map[string]any{"id": "call_1", "name": "refund_order", "arguments": map[string]any{
				"order_id": r, "amount": r, "full": r, "note": nil,
				"items": []any{map[string]any{"sku": r, "qty": r}, r},
			}},
			map[string]any{"id": "call_2", "name": "lookup_order", "arguments": map[string]any{"order_id": r}},
		},
		"result": map[string]any{"tool": "lookup_order", "output": r},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("filter(redacted) = %s\nwant %#v", raw, want)
	}
}

func TestFilterRedactedUnparsableArguments(t *testing.T) {
	b := filter(PrivacyRedacted, testArguments{Arguments: Content{Value: json.RawMessage(`{"order_id":"` + marker)}})
	if got, want := string(b), `{"arguments":"[redacted]"}`; got != want {
		t.Errorf("filter(redacted) of truncated arguments = %s, want %s", got, want)
	}
}

func TestFilterFull(t *testing.T) {
	raw, got := filtered(t, PrivacyFull)
	var args any
	if err := json.Unmarshal(markerArgs, &args); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"kind":   "approval",
		"digest": "d1g3st",
		"text":   markerText,
		"usage":  map[string]any{"input_tokens": float64(10), "output_tokens": float64(3)},
		"tool_calls": []any{
			map[string]any{"id": "call_1", "name": "refund_order", "arguments": args},
			map[string]any{"id": "call_2", "name": "lookup_order", "arguments": map[string]any{"order_id": marker}},
		},
		"result": map[string]any{"tool": "lookup_order", "output": marker},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("filter(full) = %s\nwant %#v", raw, want)
	}
}

// TestFilterUnknownLevelKeepsNoContent: a level the filter does not know
// must fail closed, like metadata.
func TestFilterUnknownLevelKeepsNoContent(t *testing.T) {
	b := filter(PrivacyLevel("bogus"), roundPayload())
	if strings.Contains(string(b), marker) {
		t.Errorf("filter(bogus) = %s, contains the content marker", b)
	}
}
