package schema

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// formField is what a valid answer holds for one field of a fuzzed form,
// written out by hand rather than read back through Fields, so that the
// fuzz target does not trust the code it checks.
type formField struct {
	name     string
	typ      string // integer, number, boolean, string, object or array
	required bool
	minimum  *float64
	maxLen   int      // in characters; 0 is no limit
	enum     []string // as FromForm's JSON spells the allowed values
}

// formFuzzSchemas are the input forms FuzzFromForm fills in: each kind of
// field FromForm parses, alone and all together.
var formFuzzSchemas = []struct {
	name, schema string
	fields       []formField
}{
	{"integer with minimum",
		`{"type":"object","properties":{"count":{"type":"integer","minimum":1}},"required":["count"]}`,
		[]formField{{name: "count", typ: "integer", required: true, minimum: ptr(1)}}},
	{"number",
		`{"type":"object","properties":{"ratio":{"type":"number"}}}`,
		[]formField{{name: "ratio", typ: "number"}}},
	{"boolean",
		`{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`,
		[]formField{{name: "ok", typ: "boolean", required: true}}},
	{"enum",
		`{"type":"object","properties":{"color":{"enum":["red","green","grün"]},"size":{"type":"integer","enum":[1,2]}}}`,
		[]formField{
			{name: "color", typ: "string", enum: []string{`"red"`, `"green"`, `"grün"`}},
			{name: "size", typ: "integer", enum: []string{"1", "2"}},
		}},
	{"string with maxLength",
		`{"type":"object","properties":{"note":{"type":"string","maxLength":5}}}`,
		[]formField{{name: "note", typ: "string", maxLen: 5}}},
	{"JSON text",
		`{"type":"object","properties":{"extra":{"type":"object"},"tags":{"type":"array"}}}`,
		[]formField{{name: "extra", typ: "object"}, {name: "tags", typ: "array"}}},
	{"all together",
		`{"type":"object","additionalProperties":false,"required":["count","zeta"],"properties":{
			"zeta":{"type":"string","maxLength":8},"count":{"type":"integer","minimum":-3},
			"ratio":{"type":"number"},"ok":{"type":"boolean"},"color":{"type":"string","enum":["red","green"]},
			"note":{"type":["null","string"]},"extra":{"type":"object"}}}`,
		[]formField{
			{name: "zeta", typ: "string", required: true, maxLen: 8},
			{name: "count", typ: "integer", required: true, minimum: ptr(-3)},
			{name: "ratio", typ: "number"},
			{name: "ok", typ: "boolean"},
			{name: "color", typ: "string", enum: []string{`"red"`, `"green"`}},
			{name: "note", typ: "string"},
			{name: "extra", typ: "object"},
		}},
}

// FuzzFromForm posts arbitrary url-encoded bodies to the input forms of
// formFuzzSchemas, as the inbox does: FromForm must answer a JSON object
// (UTF-8, as the store's JSON column requires) or a message per field,
// Errors must judge that answer, and an answer both accept must hold the
// types the schema names and the text that was typed.
func FuzzFromForm(f *testing.F) {
	v := New()
	f.Fuzz(func(t *testing.T, body string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return // the inbox answers 400 before it reads the form
		}
		for _, s := range formFuzzSchemas {
			checkFromForm(t, v, s.name, json.RawMessage(s.schema), s.fields, form)
		}
	})
}

func checkFromForm(t *testing.T, v *Validator, name string, schema json.RawMessage, fields []formField, form url.Values) {
	t.Helper()
	raw, msgs := FromForm(schema, form)
	if raw == nil {
		t.Fatalf("%s: FromForm(%q) = no value, messages %q; want a value, the schema reads", name, form, msgs)
	}
	if !json.Valid(raw) || !utf8.Valid(raw) {
		t.Fatalf("%s: FromForm(%q) = %q, which is not valid UTF-8 JSON", name, form, raw)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		t.Fatalf("%s: FromForm(%q) = %s, not a JSON object: %v", name, form, raw, err)
	}
	byName := map[string]formField{}
	for _, ff := range fields {
		byName[ff.name] = ff
	}
	for k := range obj {
		if _, ok := byName[k]; !ok {
			t.Fatalf("%s: FromForm(%q) = %s, which holds %q, not a field of the schema", name, form, raw, k)
		}
	}
	for k, m := range msgs {
		if _, ok := byName[k]; !ok || m == "" {
			t.Fatalf("%s: FromForm(%q) message %q under %q, want a message under a field of the schema", name, form, m, k)
		}
		if _, ok := obj[k]; ok {
			t.Fatalf("%s: FromForm(%q) = %s with a message for %q; a field that does not parse must be left out", name, form, raw, k)
		}
	}
	// The typed text is kept: no character of a text field is dropped or
	// replaced on its way into the answer.
	for _, ff := range fields {
		got, ok := obj[ff.name]
		if !ok || ff.typ != "string" {
			continue
		}
		var s string
		if err := json.Unmarshal(got, &s); err != nil {
			t.Fatalf("%s: FromForm(%q) = %s, %s is not a string: %v", name, form, raw, ff.name, err)
		}
		if typed := form.Get(ff.name); s != typed {
			t.Fatalf("%s: FromForm(%q) = %s: %s is %q, want the typed %q", name, form, raw, ff.name, s, typed)
		}
	}

	errs, err := v.Errors(schema, raw)
	if err != nil {
		t.Fatalf("%s: Errors(%s): %v", name, raw, err)
	}
	for k, m := range errs {
		if _, ok := byName[k]; (!ok && k != "") || m == "" {
			t.Fatalf("%s: Errors(%s) message %q under %q, want a message under a field or \"\"", name, raw, m, k)
		}
	}
	if len(msgs) > 0 || len(errs) > 0 {
		return
	}
	for _, ff := range fields {
		got, ok := obj[ff.name]
		if !ok {
			if ff.required {
				t.Fatalf("%s: %s passed FromForm and Errors without the required %s", name, raw, ff.name)
			}
			continue
		}
		if why := wrongValue(ff, got); why != "" {
			t.Fatalf("%s: %s passed FromForm and Errors, but %s %s", name, raw, ff.name, why)
		}
	}
}

// wrongValue says what is wrong with got as the value of ff, or "".
func wrongValue(ff formField, got json.RawMessage) string {
	if ff.enum != nil && !slices.Contains(ff.enum, string(got)) {
		return "is " + string(got) + ", not one of " + strings.Join(ff.enum, ", ")
	}
	switch ff.typ {
	case "integer":
		var n int64
		if err := json.Unmarshal(got, &n); err != nil {
			return "= " + string(got) + " is not an integer: " + err.Error()
		}
		if ff.minimum != nil && float64(n) < *ff.minimum {
			return "= " + string(got) + " is below the minimum " + strconv.FormatFloat(*ff.minimum, 'g', -1, 64)
		}
	case "number":
		var n float64
		if err := json.Unmarshal(got, &n); err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
			return "= " + string(got) + " is not a finite number"
		}
	case "boolean":
		var b bool
		if err := json.Unmarshal(got, &b); err != nil {
			return "= " + string(got) + " is not a boolean"
		}
	case "string":
		var s string
		if err := json.Unmarshal(got, &s); err != nil {
			return "= " + string(got) + " is not a string"
		}
		if ff.maxLen > 0 && utf8.RuneCountInString(s) > ff.maxLen {
			return "= " + string(got) + " is longer than " + strconv.Itoa(ff.maxLen) + " characters"
		}
	case "object":
		var m map[string]any
		if err := decodeNumbers(got, &m); err != nil || m == nil {
			return "= " + string(got) + " is not an object"
		}
	case "array":
		var l []any
		if err := decodeNumbers(got, &l); err != nil || l == nil {
			return "= " + string(got) + " is not an array"
		}
	}
	return ""
}

// decodeNumbers decodes JSON text keeping numbers as written: JSON allows
// 1e700 inside an object field, and the answer reaches the model as text.
func decodeNumbers(raw json.RawMessage, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(dst)
}
