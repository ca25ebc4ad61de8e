package scripted

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const refundScript = `rounds:
  - delay: 3s
    text: "Looking up the order."
    tool_calls:
      - name: lookup_order
        arguments: {order_id: "${order_id}", limit: 2, nested: {list: [1.5, "${prompt}"]}}
  - text: ["Refunding ", "now."]
    tool_calls:
      - name: refund_order
  - text: "Done."
  - text: ""
    tool_calls:
      - name: refund_order
        arguments: {}
`

func known(names ...string) func(string) bool {
	return func(n string) bool {
		for _, k := range names {
			if k == n {
				return true
			}
		}
		return false
	}
}

func mustParse(t *testing.T, src string) *Script {
	t.Helper()
	s, err := Parse("refund.yaml", []byte(src), known("lookup_order", "refund_order"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func TestParseGood(t *testing.T) {
	got := mustParse(t, refundScript)
	want := &Script{Rounds: []Round{
		{
			Delay: 3 * time.Second,
			Text:  []string{"Looking up the order."},
			ToolCalls: []Call{{Name: "lookup_order", Arguments: map[string]any{
				"order_id": "${order_id}",
				"limit":    json.Number("2"),
				"nested":   map[string]any{"list": []any{json.Number("1.5"), "${prompt}"}},
			}}},
		},
		{Text: []string{"Refunding ", "now."}, ToolCalls: []Call{{Name: "refund_order"}}},
		{Text: []string{"Done."}},
		{Text: []string{""}, ToolCalls: []Call{{Name: "refund_order"}}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse:\n got %#v\nwant %#v", got, want)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"yaml syntax", "rounds:\n  - text: a\n    tool_calls: [\n", "refund.yaml:3: did not find expected node content"},
		{"yaml syntax on the first line", "rounds: a: b", "refund.yaml:1: mapping values are not allowed in this context"},
		{"yaml bad indentation", "rounds:\n  - text: a\n    delay: 1s\n   text: b\n", "refund.yaml:4: did not find expected '-' indicator"},
		{"yaml unclosed flow list", "rounds:\n  - text: a\n  - text: [b, c\n    delay: 1s\n", "refund.yaml:3: did not find expected ',' or ']'"},
		{"yaml unclosed quote", "rounds:\n  - text: a\n  - text: \"b\n", "refund.yaml:3: found unexpected end of stream"},
		{"yaml tab", "rounds:\n  - text: a\n\t- text: b\n", "refund.yaml:3: found a tab character"},
		{"yaml unknown anchor", "rounds:\n  - text: a\n  - text: *b\n", "refund.yaml:3: unknown anchor 'b' referenced"},
		{"unknown tool", "rounds:\n  - text: a\n  - text: b\n    tool_calls:\n      - name: lookup_order\n      - name: refnd_order\n", `refund.yaml:6: unknown tool "refnd_order"`},
		{"unknown key in a round", "rounds:\n  - text: a\n    tool_call: []\n", `refund.yaml:3: unknown key "tool_call" in round 1`},
		{"unknown key at the top", "rounds:\n  - text: a\nround: 2\n", `refund.yaml:3: unknown key "round" in the script`},
		{"unknown key in a call", "rounds:\n  - tool_calls:\n      - name: lookup_order\n        args: {}\n", `refund.yaml:4: unknown key "args" in round 1, tool call 1`},
		{"bad delay", "rounds:\n  - text: a\n  - delay: 3 seconds\n", `refund.yaml:3: delay "3 seconds" is not a duration`},
		{"negative delay", "rounds:\n  - delay: -1s\n", `refund.yaml:2: delay must not be negative`},
		{"empty file", "", "refund.yaml:1: the script is empty"},
		{"only a comment", "# nothing yet\n", "refund.yaml:1: the script is empty"},
		{"no rounds", "rounds: []\n", "refund.yaml:1: the script has no rounds"},
		{"rounds not a list", "rounds: 3\n", "refund.yaml:1: rounds must be a list"},
		{"text a mapping", "rounds:\n  - text: {a: b}\n", "refund.yaml:2: text must be a string or a list of strings"},
		{"call without name", "rounds:\n  - tool_calls:\n      - arguments: {a: 1}\n", "refund.yaml:3: round 1, tool call 1 has no name"},
		{"arguments not a mapping", "rounds:\n  - tool_calls:\n      - name: lookup_order\n        arguments: [1]\n", "refund.yaml:4: arguments must be a mapping"},
		{"arguments with number keys", "rounds:\n  - tool_calls:\n      - name: lookup_order\n        arguments: {a: {1: x}}\n", "refund.yaml:4: arguments cannot be written as JSON"},
		{"key twice", "rounds:\n  - text: a\n    text: b\n", `refund.yaml:3: "text" is given twice (first on line 2)`},
		{"text and deltas", "rounds:\n  - text: a\n    deltas: [{text: b}]\n", `refund.yaml:3: round 1: give text or deltas, not both`},
		{"deltas not a list", "rounds:\n  - deltas: b\n", `refund.yaml:2: deltas must be a list of {text, after}`},
		{"delta without text", "rounds:\n  - deltas: [{after: 1s}]\n", `refund.yaml:2: round 1, delta 1 has no text`},
		{"delta bad after", "rounds:\n  - deltas:\n      - {text: a, after: soon}\n", `refund.yaml:3: after "soon" is not a duration`},
		{"delta negative after", "rounds:\n  - deltas:\n      - {text: a, after: -1s}\n", `refund.yaml:3: after must not be negative`},
		{"delta bad thinking", "rounds:\n  - deltas:\n      - {text: a, thinking: maybe}\n", `refund.yaml:3: thinking must be true or false`},
		{"delta unknown key", "rounds:\n  - deltas:\n      - {text: a, wait: 1s}\n", `refund.yaml:3: unknown key "wait" in round 1, delta 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("refund.yaml", []byte(tt.src), known("lookup_order", "refund_order"))
			if err == nil {
				t.Fatalf("Parse: no error, want %q", tt.want)
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.want) {
				t.Errorf("Parse error:\n got %q\nwant prefix %q", got, tt.want)
			}
		})
	}
}

func TestParseWithoutToolCheck(t *testing.T) {
	s, err := Parse("any.yaml", []byte("rounds:\n  - tool_calls: [{name: whatever}]\n"), nil)
	if err != nil {
		t.Fatalf("Parse with nil knownTool: %v", err)
	}
	if got, want := s.Rounds[0].ToolCalls[0].Name, "whatever"; got != want {
		t.Errorf("tool name = %q, want %q", got, want)
	}
}

func TestFromNodeInline(t *testing.T) {
	src := "identifier: x\nprovider:\n  script:\n    rounds:\n      - tool_calls: [{name: nope}]\n"
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	scriptNode := doc.Content[0].Content[3].Content[1] // provider → script
	_, err := FromNode("agent.yaml", scriptNode, known("lookup_order"))
	if got, want := errString(err), `agent.yaml:5: unknown tool "nope"`; got != want {
		t.Errorf("FromNode error = %q, want %q", got, want)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func TestJSONRoundTrip(t *testing.T) {
	want := mustParse(t, refundScript)
	raw, err := want.JSON()
	if err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if !strings.Contains(string(raw), `"delay":"3s"`) {
		t.Errorf("JSON = %s, want the delay as \"3s\"", raw)
	}
	got, err := FromJSON(raw)
	if err != nil {
		t.Fatalf("FromJSON(%s): %v", raw, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip:\n got %#v\nwant %#v", got, want)
	}
}

func TestYAMLRoundTrip(t *testing.T) {
	want := mustParse(t, refundScript)
	out, err := yaml.Marshal(want)
	if err != nil {
		t.Fatalf("yaml.Marshal: %v", err)
	}
	got, err := Parse("out.yaml", out, nil)
	if err != nil {
		t.Fatalf("Parse(%s): %v", out, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip through\n%s\n got %#v\nwant %#v", out, got, want)
	}
}

func TestFromJSONErrors(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string
	}{
		{"not json", `{`, "scripted: read script:"},
		{"no rounds", `{"rounds":[]}`, "the script has no rounds"},
		{"bad delay", `{"rounds":[{"delay":"soon"}]}`, `delay "soon" is not a duration`},
		{"negative delay", `{"rounds":[{"delay":"-2s"}]}`, "delay must not be negative"},
		{"unknown field", `{"rounds":[{"txt":["a"]}]}`, `unknown field "txt"`},
		{"nameless call", `{"rounds":[{"tool_calls":[{"arguments":{}}]}]}`, "tool call 1 has no name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromJSON(json.RawMessage(tt.raw))
			if got := errString(err); !strings.Contains(got, tt.want) {
				t.Errorf("FromJSON(%s) error = %q, want it to contain %q", tt.raw, got, tt.want)
			}
		})
	}
}

func TestParseDeltasAndReadThemBack(t *testing.T) {
	src := "rounds:\n  - deltas:\n      - {text: \"Weighing it. \", thinking: true}\n      - {text: \"Refunding \", after: 250ms}\n      - {text: \"now.\", after: 1s}\n    tool_calls:\n      - name: refund_order\n"
	got := mustParse(t, src)
	want := []Delta{{Text: "Weighing it. ", Thinking: true}, {Text: "Refunding ", After: 250 * time.Millisecond}, {Text: "now.", After: time.Second}}
	if !reflect.DeepEqual(got.Rounds[0].Deltas, want) || got.Rounds[0].Text != nil {
		t.Fatalf("deltas = %+v, text %q; want %+v and no text", got.Rounds[0].Deltas, got.Rounds[0].Text, want)
	}
	raw, err := got.JSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := FromJSON(raw)
	if err != nil {
		t.Fatalf("FromJSON(%s): %v", raw, err)
	}
	if !reflect.DeepEqual(back, got) {
		t.Errorf("read back from JSON:\n got %+v\nwant %+v", back, got)
	}
	y, err := yaml.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if again := mustParse(t, string(y)); !reflect.DeepEqual(again, got) {
		t.Errorf("read back from YAML %s:\n got %+v\nwant %+v", y, again, got)
	}
	if _, err := FromJSON([]byte(`{"rounds":[{"text":["a"],"deltas":[{"text":"b"}]}]}`)); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("FromJSON of text and deltas: %v, want an error saying not both", err)
	}
}
