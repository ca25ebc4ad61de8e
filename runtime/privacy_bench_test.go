package runtime

import (
	"encoding/json"
	"testing"
)

// mapContent, mapPayload and mapFilter are the filter as it was before
// payloads were typed, built on maps: kept to compare the typed filter
// with, in output and in cost.
type mapContent struct{ v any }

type mapPayload map[string]any

func mapFilter(level PrivacyLevel, p mapPayload) json.RawMessage {
	b, err := json.Marshal(mapFilterObject(level, p))
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": "payload not encodable"})
	}
	return b
}

func mapFilterObject(level PrivacyLevel, p map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		switch v := v.(type) {
		case mapContent:
			switch level {
			case PrivacyFull:
				out[k] = v.v
			case PrivacyRedacted:
				out[k] = redact(v.v)
			default:
				out[k+"_bytes"] = size(v.v)
			}
		case []mapPayload:
			list := make([]any, len(v))
			for i, e := range v {
				list[i] = mapFilterObject(level, e)
			}
			out[k] = list
		default:
			out[k] = v
		}
	}
	return out
}

// benchRound is a model round of two calls, as a map and as its struct.
func benchRound() (mapPayload, LLMPayload) {
	res := RoundResult{Text: "I refund it. " + goldenSecret, ToolCalls: goldenCalls, Usage: Usage{InputTokens: 187, OutputTokens: 23}}
	calls := make([]mapPayload, len(res.ToolCalls))
	for i, tc := range res.ToolCalls {
		calls[i] = mapPayload{"id": tc.ID, "name": tc.Name, "arguments": mapContent{tc.Arguments}}
	}
	m := mapPayload{"text": mapContent{res.Text}, "tool_calls": calls, "usage": res.Usage}
	return m, LLMPayload{Text: Content{Value: res.Text}, ToolCalls: callPayloads(res.ToolCalls), Usage: res.Usage}
}

var levels = []PrivacyLevel{PrivacyMetadata, PrivacyRedacted, PrivacyFull, "bogus"}

// TestFilterAsMaps: the typed filter writes what the map filter wrote,
// for a round at every level, an unknown one included.
func TestFilterAsMaps(t *testing.T) {
	m, p := benchRound()
	for _, level := range levels {
		if got, want := string(filter(level, p)), string(mapFilter(level, m)); got != want {
			t.Errorf("%s:\ngot  %s\nwant %s", level, got, want)
		}
	}
}

// BenchmarkFilter builds and filters a model round's payload, as a map
// (the filter before payloads were typed) and as its struct.
func BenchmarkFilter(b *testing.B) {
	for _, level := range levels[:3] {
		b.Run("map/"+string(level), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				m, _ := benchRound()
				mapFilter(level, m)
			}
		})
		b.Run("struct/"+string(level), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, p := benchRound()
				filter(level, p)
			}
		})
	}
}
