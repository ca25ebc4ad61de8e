// Package builtin holds the demo's built-in tools. Two of them act on real
// MySQL tables (demo_orders, demo_refunds) through the Orders interface
// declared here, so that a tool's side effects can be counted; the other two
// ask a person for input and stay silent for a while.
//
// Every tool decodes its arguments strictly: an unknown field, a wrong type
// or a missing required field is an error, which the engine hands to the
// model as the tool's result.
package builtin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
)

// The names of the built-in tools, as configurations list them.
const (
	NameLookupOrder = "lookup_order"
	NameRefundOrder = "refund_order"
	NameAskOperator = "ask_operator"
	NameSlowTask    = "slow_task"
)

// Orders is what the order tools need of the database. The store satisfies
// it with the demo_orders and demo_refunds tables.
type Orders interface {
	// Order returns an order, or an error wrapping runtime.ErrNotFound when
	// there is none with this id.
	Order(ctx context.Context, id string) (Order, error)
	// InsertRefund records one refund and returns its id. It never
	// de-duplicates: every call is one more row.
	InsertRefund(ctx context.Context, r Refund) (int64, error)
}

// Tools returns the four built-in tools, the order tools acting on orders.
func Tools(orders Orders) []runtime.Tool {
	return []runtime.Tool{
		NewLookupOrder(orders),
		NewRefundOrder(orders),
		AskOperator{},
		SlowTask{},
	}
}

// Registry indexes tools by their spec's name. When two tools share a name
// the later one wins, so a caller can replace a built-in tool.
func Registry(tools ...runtime.Tool) map[string]runtime.Tool {
	m := make(map[string]runtime.Tool, len(tools))
	for _, t := range tools {
		m[t.Spec().Name] = t
	}
	return m
}

// decodeArgs decodes a tool's arguments into dst strictly: exactly one JSON
// object, no unknown fields, every field of its declared type. Its messages
// are written for the model that sent the arguments.
func decodeArgs(tool string, raw json.RawMessage, dst any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return fmt.Errorf("%s: invalid arguments: %s", tool, describeDecodeError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s: invalid arguments: trailing data after the JSON object", tool)
	}
	return nil
}

func describeDecodeError(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return fmt.Sprintf("arguments must be a JSON object, not %s", typeErr.Value)
		}
		return fmt.Sprintf("%s must be %s, not %s", typeErr.Field, jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Sprintf("not valid JSON (%s)", syntaxErr.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON (unexpected end)"
	}
	// DisallowUnknownFields reports `json: unknown field "x"` and nothing
	// more structured.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Sprintf("unknown field %s", name)
	}
	return err.Error()
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "bool":
		return "a boolean"
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	return "of another type"
}

var intType = reflect.TypeFor[int64]()

// integer is a JSON integer. Like JSON Schema's "integer" it accepts 100 and
// 100.0 alike (models send both), but not 100.5 nor a string.
type integer struct {
	set   bool
	value int64
}

func (n *integer) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = integer{}
		return nil
	}
	// Decoding into json.Number would take "12" too; JSON Schema does not.
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	num, ok := v.(json.Number)
	if !ok {
		return &json.UnmarshalTypeError{Value: jsonKind(v), Type: intType}
	}
	if i, err := num.Int64(); err == nil {
		*n = integer{set: true, value: i}
		return nil
	}
	f, err := num.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return &json.UnmarshalTypeError{Value: "number " + num.String(), Type: intType}
	}
	*n = integer{set: true, value: int64(f)}
	return nil
}

// jsonKind names a decoded JSON value's kind the way encoding/json's own
// type errors do.
func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "number"
}

// resultJSON marshals a tool's result; the types passed in always marshal.
func resultJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode result: %w", err)
	}
	return string(b), nil
}
