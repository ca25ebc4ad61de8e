package runtime

import (
	"encoding/json"
)

// content marks a value of an event payload as run content: prompts,
// answers, arguments, results. The privacy filter decides what of it is
// stored; everything else in a payload is metadata and always kept.
type content struct{ v any }

// payload is an event's payload before the privacy filter.
type payload map[string]any

// filter renders a payload at a privacy level: full keeps content,
// redacted keeps its shape with every scalar replaced, metadata drops it and
// keeps its size under "<key>_bytes".
func filter(level PrivacyLevel, p payload) json.RawMessage {
	out := filterMap(level, p)
	b, err := json.Marshal(out)
	if err != nil {
		// Payloads are built from JSON values; this cannot happen.
		b, _ = json.Marshal(map[string]string{"error": "payload not encodable"})
	}
	return b
}

func filterMap(level PrivacyLevel, p map[string]any) map[string]any {
	out := make(map[string]any, len(p))
	for k, v := range p {
		switch v := v.(type) {
		case content:
			switch level {
			case PrivacyFull:
				out[k] = v.v
			case PrivacyRedacted:
				out[k] = redact(v.v)
			default:
				out[k+"_bytes"] = size(v.v)
			}
		default:
			out[k] = filterValue(level, v)
		}
	}
	return out
}

func filterValue(level PrivacyLevel, v any) any {
	switch v := v.(type) {
	case payload:
		return filterMap(level, v)
	case map[string]any:
		return filterMap(level, v)
	case []payload:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = filterMap(level, e)
		}
		return out
	default:
		return v
	}
}

// redact keeps a value's structure (object keys, list lengths) and hides
// every scalar in it.
func redact(v any) any {
	switch v := v.(type) {
	case json.RawMessage:
		var decoded any
		if json.Unmarshal(v, &decoded) != nil {
			return "[redacted]"
		}
		return redact(decoded)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = redact(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = redact(e)
		}
		return out
	case nil:
		return nil
	default:
		return "[redacted]"
	}
}

func size(v any) int {
	switch v := v.(type) {
	case string:
		return len(v)
	case json.RawMessage:
		return len(v)
	default:
		b, _ := json.Marshal(v)
		return len(b)
	}
}
