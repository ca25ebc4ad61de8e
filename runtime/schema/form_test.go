package schema

import (
	"encoding/json"
	"reflect"
	"testing"
)

const askSchema = `{
  "type": "object",
  "properties": {
    "zeta": {"type": "string", "title": "Last in the alphabet, first in the form"},
    "count": {"type": "integer", "minimum": 1, "maximum": 9, "description": "How many"},
    "ratio": {"type": "number"},
    "ok": {"type": "boolean"},
    "color": {"enum": ["red", "green"]},
    "size": {"type": "integer", "enum": [1, 2]},
    "note": {"type": ["null", "string"]},
    "extra": {"type": "object"}
  },
  "required": ["count", "zeta"]
}`

func ptr(f float64) *float64 { return &f }

func TestFields(t *testing.T) {
	got, err := Fields(json.RawMessage(askSchema))
	if err != nil {
		t.Fatalf("Fields: %v", err)
	}
	want := []Field{
		{Name: "zeta", Title: "Last in the alphabet, first in the form", Type: "string", Required: true},
		{Name: "count", Title: "count", Description: "How many", Type: "integer", Required: true, Minimum: ptr(1), Maximum: ptr(9)},
		{Name: "ratio", Title: "ratio", Type: "number"},
		{Name: "ok", Title: "ok", Type: "boolean"},
		{Name: "color", Title: "color", Type: "string", Enum: []string{"red", "green"}},
		{Name: "size", Title: "size", Type: "integer", Enum: []string{"1", "2"}},
		{Name: "note", Title: "note", Type: "string"},
		{Name: "extra", Title: "extra", Type: "object"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Fields:\n got %+v\nwant %+v", got, want)
	}
}

func TestFieldsEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		want    []string // field names in order
		wantErr bool
	}{
		{"no properties", `{"type": "string"}`, []string{}, false},
		{"properties after other keys", `{"required": ["b"], "$defs": {"x": {"properties": {"no": {}}}}, "properties": {"b": {}, "a": {}}}`, []string{"b", "a"}, false},
		{"not an object", `[1]`, nil, true},
		{"not JSON", `{"properties": {`, nil, true},
		{"properties not an object", `{"properties": [1]}`, nil, true},
		{"property schema not an object", `{"properties": {"a": 3}}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fields, err := Fields(json.RawMessage(tt.schema))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Fields error = %v, want error: %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			got := []string{}
			for _, f := range fields {
				got = append(got, f.Name)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("field names = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFromForm(t *testing.T) {
	tests := []struct {
		name     string
		form     map[string][]string
		want     string
		wantMsgs map[string]string
	}{
		{
			name: "every type",
			form: map[string][]string{
				"zeta": {"hello "}, "count": {" 3 "}, "ratio": {"0.25"}, "ok": {"on"},
				"color": {"red"}, "size": {"2"}, "note": {"n"}, "extra": {`{"a": [1]}`},
				"turn_digest": {"abc"}, "csrf_token": {"t"},
			},
			want: `{"color":"red","count":3,"extra":{"a":[1]},"note":"n","ok":true,"ratio":0.25,"size":2,"zeta":"hello "}`,
		},
		{
			name: "empty fields are left out and an absent checkbox is false",
			form: map[string][]string{"zeta": {""}, "count": {""}, "ratio": {"  "}, "note": {""}},
			want: `{"ok":false}`,
		},
		{
			name: "checkbox spellings",
			form: map[string][]string{"ok": {"1"}},
			want: `{"ok":true}`,
		},
		{
			name: "checkbox false",
			form: map[string][]string{"ok": {"false"}},
			want: `{"ok":false}`,
		},
		{
			name:     "values that do not parse",
			form:     map[string][]string{"zeta": {"z"}, "count": {"3.5"}, "ratio": {"abc"}, "ok": {"maybe"}, "extra": {"{"}, "size": {"two"}},
			want:     `{"zeta":"z"}`,
			wantMsgs: map[string]string{"count": "must be a whole number", "ratio": "must be a number", "ok": "must be true or false", "extra": "must be valid JSON", "size": "must be a whole number"},
		},
		{
			name:     "infinity is not a number",
			form:     map[string][]string{"ratio": {"Inf"}},
			want:     `{"ok":false}`,
			wantMsgs: map[string]string{"ratio": "must be a number"},
		},
		{
			name:     "integer out of range",
			form:     map[string][]string{"count": {"99999999999999999999"}},
			want:     `{"ok":false}`,
			wantMsgs: map[string]string{"count": "must be a whole number"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, gotMsgs := FromForm(json.RawMessage(askSchema), tt.form)
			if string(got) != tt.want {
				t.Errorf("FromForm value\n got %s\nwant %s", got, tt.want)
			}
			if !reflect.DeepEqual(gotMsgs, tt.wantMsgs) {
				t.Errorf("FromForm messages\n got %q\nwant %q", gotMsgs, tt.wantMsgs)
			}
		})
	}
}

func TestFromFormThenErrors(t *testing.T) {
	value, msgs := FromForm(json.RawMessage(askSchema), map[string][]string{"zeta": {""}, "count": {"12"}})
	if msgs != nil {
		t.Fatalf("FromForm messages = %q, want none", msgs)
	}
	got, err := New().Errors(json.RawMessage(askSchema), value)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"zeta": "is required", "count": "must be at most 9"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Errors(%s) = %q, want %q", value, got, want)
	}
}

func TestFromFormBrokenSchema(t *testing.T) {
	got, msgs := FromForm(json.RawMessage(`{"properties": 3}`), map[string][]string{"a": {"b"}})
	if got != nil || msgs[""] == "" {
		t.Errorf("FromForm = %s, %q; want no value and a message under \"\"", got, msgs)
	}
}
