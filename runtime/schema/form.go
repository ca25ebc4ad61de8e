package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Field is one top-level property of an object schema, as a form shows it.
type Field struct {
	Name        string
	Title       string // the schema's title, else Name
	Description string
	// Type is the JSON type: string, integer, number or boolean; object and
	// array fields take JSON text.
	Type     string
	Enum     []string // the allowed values as text, if the schema lists them
	Required bool
	Minimum  *float64
	Maximum  *float64
}

// property is what Fields reads of a property's schema.
type property struct {
	Title       string          `json:"title"`
	Description string          `json:"description"`
	Type        json.RawMessage `json:"type"`
	Enum        []any           `json:"enum"`
	Minimum     *float64        `json:"minimum"`
	Maximum     *float64        `json:"maximum"`
}

// Fields describes the top-level properties of an object schema in the
// order the schema document lists them. A schema without properties has no
// fields. It fails when schema is not a JSON object or a property's schema
// is not one.
func Fields(schema json.RawMessage) ([]Field, error) {
	var top struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(schema, &top); err != nil {
		return nil, fmt.Errorf("schema: fields: %w", err)
	}
	names, raws, err := orderedProperties(schema)
	if err != nil {
		return nil, fmt.Errorf("schema: fields: %w", err)
	}
	required := map[string]bool{}
	for _, r := range top.Required {
		required[r] = true
	}
	fields := make([]Field, 0, len(names))
	for i, name := range names {
		var p property
		if err := json.Unmarshal(raws[i], &p); err != nil {
			return nil, fmt.Errorf("schema: fields: property %s: %w", name, err)
		}
		f := Field{
			Name:        name,
			Title:       p.Title,
			Description: p.Description,
			Type:        fieldType(p),
			Required:    required[name],
			Minimum:     p.Minimum,
			Maximum:     p.Maximum,
		}
		if f.Title == "" {
			f.Title = name
		}
		for _, e := range p.Enum {
			f.Enum = append(f.Enum, display(e))
		}
		fields = append(fields, f)
	}
	return fields, nil
}

// orderedProperties reads the top-level "properties" object token by token,
// since a Go map would lose the order its author gave the fields.
func orderedProperties(schema json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	if err := expectDelim(dec, '{'); err != nil {
		return nil, nil, err
	}
	var names []string
	var raws []json.RawMessage
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		if key != "properties" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, err
			}
			continue
		}
		if err := expectDelim(dec, '{'); err != nil {
			return nil, nil, fmt.Errorf("properties: %w", err)
		}
		names, raws = nil, nil // a repeated key wins, as in encoding/json
		for dec.More() {
			name, err := dec.Token()
			if err != nil {
				return nil, nil, err
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, nil, err
			}
			names = append(names, name.(string))
			raws = append(raws, raw)
		}
		if _, err := dec.Token(); err != nil { // the closing brace
			return nil, nil, err
		}
	}
	return names, raws, nil
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("want a JSON object, got %v", tok)
	}
	return nil
}

// fieldType picks the form's type: the schema's type (the first one other
// than null when it lists several), else string.
func fieldType(p property) string {
	var one string
	if json.Unmarshal(p.Type, &one) == nil && one != "" {
		return one
	}
	var many []string
	if json.Unmarshal(p.Type, &many) == nil {
		for _, t := range many {
			if t != "null" {
				return t
			}
		}
	}
	return "string"
}

// FromForm turns submitted form values into a JSON object for the schema:
// integers and numbers parsed, booleans from a checkbox ("true", "on" or "1";
// absent, "", "false", "off" or "0" is false), everything else kept as text;
// object and array fields take JSON text. An empty field is left out, so a
// required one is reported by Errors as "is required". Form values that are
// not properties of the schema (turn_digest, csrf_token) are ignored.
//
// The map holds a message per field whose value does not parse ("must be a
// whole number"), or one under "" when the schema itself does not read; it is
// nil when every value parsed. FromForm validates nothing beyond parsing:
// callers pass the result to Errors.
func FromForm(schema json.RawMessage, form map[string][]string) (json.RawMessage, map[string]string) {
	fields, err := Fields(schema)
	if err != nil {
		return nil, map[string]string{"": "the form's schema cannot be read"}
	}
	obj := map[string]any{}
	msgs := map[string]string{}
	for _, f := range fields {
		var v string
		if vs := form[f.Name]; len(vs) > 0 {
			v = vs[0]
		}
		if !utf8.ValidString(v) {
			msgs[f.Name] = "must be valid text (UTF-8)"
			continue
		}
		t := strings.TrimSpace(v)
		switch f.Type {
		case "boolean":
			switch strings.ToLower(t) {
			case "true", "on", "1":
				obj[f.Name] = true
			case "", "false", "off", "0":
				obj[f.Name] = false
			default:
				msgs[f.Name] = "must be true or false"
			}
		case "integer":
			if t == "" {
				continue
			}
			n, err := strconv.ParseInt(t, 10, 64)
			if err != nil {
				msgs[f.Name] = "must be a whole number"
				continue
			}
			obj[f.Name] = n
		case "number":
			if t == "" {
				continue
			}
			n, err := strconv.ParseFloat(t, 64)
			if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
				msgs[f.Name] = "must be a number"
				continue
			}
			obj[f.Name] = n
		case "object", "array":
			if t == "" {
				continue
			}
			if !json.Valid([]byte(t)) {
				msgs[f.Name] = "must be valid JSON"
				continue
			}
			obj[f.Name] = json.RawMessage(t)
		default:
			if v == "" {
				continue
			}
			obj[f.Name] = v
		}
	}
	raw, err := json.Marshal(obj)
	if err != nil { // cannot happen: every value above marshals
		return nil, map[string]string{"": "the form cannot be written as JSON"}
	}
	if len(msgs) == 0 {
		msgs = nil
	}
	return raw, msgs
}
