package scripted

import (
	"reflect"
	"regexp"
	"testing"
)

// fuzzError is how every error of Parse begins: the file and a line.
var fuzzError = regexp.MustCompile(`^f\.yaml:[1-9][0-9]*: `)

// FuzzScriptParse reads arbitrary files as scripts. An error names the
// file and a line; a script that parses is stored as JSON (JSON, FromJSON)
// without changing, and the tool check only ever refuses.
func FuzzScriptParse(f *testing.F) {
	f.Add([]byte(refundScript))
	knownTool := known("lookup_order", "refund_order", "ask_operator")
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Parse("f.yaml", data, knownTool)
		unchecked, uncheckedErr := Parse("f.yaml", data, nil)
		for _, e := range []error{err, uncheckedErr} {
			if e != nil && !fuzzError.MatchString(e.Error()) {
				t.Fatalf("Parse(%q) error %q, want it to start with f.yaml:<line>: ", data, e)
			}
		}
		if err != nil {
			return
		}
		if uncheckedErr != nil || !reflect.DeepEqual(unchecked, got) {
			t.Fatalf("Parse(%q) = %#v with the tool check, %#v, %v without it; want the same script", data, got, unchecked, uncheckedErr)
		}
		if len(got.Rounds) == 0 {
			t.Fatalf("Parse(%q) = a script without rounds, want an error", data)
		}
		for _, r := range got.Rounds {
			for _, c := range r.ToolCalls {
				if !knownTool(c.Name) {
					t.Fatalf("Parse(%q) accepted the unknown tool %q", data, c.Name)
				}
			}
		}
		raw, err := got.JSON()
		if err != nil {
			t.Fatalf("Parse(%q) = %#v, which JSON refuses: %v", data, got, err)
		}
		back, err := FromJSON(raw)
		if err != nil {
			t.Fatalf("Parse(%q) = %#v, stored as %s, which FromJSON refuses: %v", data, got, raw, err)
		}
		if !reflect.DeepEqual(back, got) {
			t.Fatalf("Parse(%q) = %#v, stored as %s, read back as %#v", data, got, raw, back)
		}
	})
}
