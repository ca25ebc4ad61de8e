package schema

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

const refundSchema = `{
  "type": "object",
  "properties": {
    "order_id": {"type": "string", "title": "Order", "minLength": 1, "pattern": "^[A-Z]+-[0-9]+$"},
    "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 500},
    "quantity": {"type": "integer", "minimum": 1, "maximum": 10, "multipleOf": 2},
    "reason": {"enum": ["damaged", "late", "other"]},
    "notify": {"type": "boolean"},
    "note": {"type": ["string", "null"], "maxLength": 5},
    "email": {"type": "string", "format": "email"},
    "address": {
      "type": "object",
      "properties": {"zip": {"type": "string"}},
      "required": ["zip"]
    },
    "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "uniqueItems": true},
    "kind": {"const": "refund"}
  },
  "required": ["order_id", "quantity"],
  "additionalProperties": false
}`

func errorsOf(t *testing.T, v *Validator, schema, value string) map[string]string {
	t.Helper()
	got, err := v.Errors(json.RawMessage(schema), json.RawMessage(value))
	if err != nil {
		t.Fatalf("Errors(%s): %v", value, err)
	}
	return got
}

func TestErrorsMessages(t *testing.T) {
	v := New()
	tests := []struct {
		name  string
		value string
		want  map[string]string
	}{
		{"valid", `{"order_id": "ORD-1", "quantity": 2, "note": null, "address": {"zip": "1000"}}`, nil},
		{"missing required", `{}`, map[string]string{"order_id": "is required", "quantity": "is required"}},
		{"not an integer", `{"order_id": "ORD-1", "quantity": 2.5}`, map[string]string{"quantity": "must be an integer"}},
		{"integer given as a string", `{"order_id": "ORD-1", "quantity": "2"}`, map[string]string{"quantity": "must be an integer"}},
		{"below minimum", `{"order_id": "ORD-1", "quantity": 0}`, map[string]string{"quantity": "must be at least 1"}},
		{"above maximum", `{"order_id": "ORD-1", "quantity": 12}`, map[string]string{"quantity": "must be at most 10"}},
		{"not a multiple", `{"order_id": "ORD-1", "quantity": 3}`, map[string]string{"quantity": "must be a multiple of 2"}},
		{"exclusive minimum", `{"order_id": "ORD-1", "quantity": 2, "amount": 0}`, map[string]string{"amount": "must be greater than 0"}},
		{"fractional maximum", `{"order_id": "ORD-1", "quantity": 2, "amount": 500.5}`, map[string]string{"amount": "must be at most 500"}},
		{"not a number", `{"order_id": "ORD-1", "quantity": 2, "amount": "ten"}`, map[string]string{"amount": "must be a number"}},
		{"enum", `{"order_id": "ORD-1", "quantity": 2, "reason": "bored"}`, map[string]string{"reason": "must be one of: damaged, late, other"}},
		{"const", `{"order_id": "ORD-1", "quantity": 2, "kind": "sale"}`, map[string]string{"kind": "must be refund"}},
		{"not a string", `{"order_id": 7, "quantity": 2}`, map[string]string{"order_id": "must be a string"}},
		{"empty string", `{"order_id": "", "quantity": 2}`, map[string]string{"order_id": "must not be empty"}},
		{"pattern", `{"order_id": "order 7", "quantity": 2}`, map[string]string{"order_id": "must match the pattern ^[A-Z]+-[0-9]+$"}},
		{"too long", `{"order_id": "ORD-1", "quantity": 2, "note": "far too long"}`, map[string]string{"note": "must be at most 5 characters long"}},
		{"several types", `{"order_id": "ORD-1", "quantity": 2, "note": 3}`, map[string]string{"note": "must be a string or null"}},
		{"boolean", `{"order_id": "ORD-1", "quantity": 2, "notify": "yes"}`, map[string]string{"notify": "must be true or false"}},
		{"unknown field", `{"order_id": "ORD-1", "quantity": 2, "refund_all": true}`, map[string]string{"refund_all": "is not allowed"}},
		{"nested required", `{"order_id": "ORD-1", "quantity": 2, "address": {}}`, map[string]string{"address": "zip: is required"}},
		{"nested type", `{"order_id": "ORD-1", "quantity": 2, "address": {"zip": 1000}}`, map[string]string{"address": "zip: must be a string"}},
		{"array items", `{"order_id": "ORD-1", "quantity": 2, "tags": ["a", 2]}`, map[string]string{"tags": "1: must be a string"}},
		{"array length", `{"order_id": "ORD-1", "quantity": 2, "tags": []}`, map[string]string{"tags": "must have at least 1 item"}},
		{"array duplicates", `{"order_id": "ORD-1", "quantity": 2, "tags": ["a", "a"]}`, map[string]string{"tags": "must not repeat an item"}},
		{"format", `{"order_id": "ORD-1", "quantity": 2, "email": "nobody"}`, map[string]string{"email": "must be a valid email"}},
		{"whole value", `[1, 2]`, map[string]string{"": "must be an object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := errorsOf(t, v, refundSchema, tt.value)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Errors(%s)\n got %q\nwant %q", tt.value, got, tt.want)
			}
		})
	}
}

func TestErrorsFailures(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		value  string
		want   string
	}{
		{"schema not JSON", `{"type":`, `{}`, "the schema is not JSON"},
		{"schema does not compile", `{"type": "whole number"}`, `{}`, "compile"},
		{"bad regular expression", `{"pattern": "("}`, `"x"`, "compile"},
		{"reference outside the schema", `{"$ref": "other.json"}`, `{}`, "compile"},
		{"value not JSON", `{"type": "object"}`, `{"a":`, "the value is not JSON"},
		{"value with trailing data", `{"type": "object"}`, `{} {}`, "the value is not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := New().Errors(json.RawMessage(tt.schema), json.RawMessage(tt.value))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
			if got != nil {
				t.Errorf("messages = %q, want nil alongside an error", got)
			}
		})
	}
}

func TestErrorsCachesCompiledSchemas(t *testing.T) {
	v := New()
	other := `{"type": "object", "properties": {"a": {"type": "integer"}}}`
	for i := 0; i < 3; i++ {
		errorsOf(t, v, refundSchema, `{}`)
		errorsOf(t, v, other, `{"a": 1}`)
	}
	if got, want := v.compiles, 2; got != want {
		t.Errorf("compiled %d schemas for 2 distinct ones used 3 times each, want %d", got, want)
	}
	if _, err := v.Errors(json.RawMessage(`{"type": 1}`), json.RawMessage(`{}`)); err == nil {
		t.Fatal("broken schema compiled")
	}
	if got, want := len(v.cache), 2; got != want {
		t.Errorf("cache holds %d schemas after a broken one, want %d", got, want)
	}
}

func TestErrorsConcurrent(t *testing.T) {
	v := New()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				schema := fmt.Sprintf(`{"type": "object", "properties": {"n": {"type": "integer", "minimum": %d}}}`, i%4)
				got, err := v.Errors(json.RawMessage(schema), json.RawMessage(`{"n": -1}`))
				if err != nil {
					errs <- err
					return
				}
				if want := fmt.Sprintf("must be at least %d", i%4); got["n"] != want {
					errs <- fmt.Errorf("schema %d: got %q, want %q", i%4, got["n"], want)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, want := len(v.cache), 4; got != want {
		t.Errorf("cache holds %d schemas, want %d", got, want)
	}
}

func TestErrorsValidValue(t *testing.T) {
	got, err := New().Errors(json.RawMessage(`{"type":"string"}`), json.RawMessage(`"x"`))
	if err != nil || got != nil {
		t.Errorf("Errors of a valid value = %q, %v; want nil, nil", got, err)
	}
}
