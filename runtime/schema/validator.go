// Package schema checks values against JSON Schemas (tool arguments, the
// answers people type for input tools) and turns a schema into the fields of
// an HTML form and a submitted form back into JSON.
package schema

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/turnstile-dev/turnstile/runtime"
)

// maxCached bounds the cache; schemas come from tool specs, so a working
// server stays far below it, and a flood of distinct schemas only costs
// recompilation.
const maxCached = 1024

// schemaURL is where every schema pretends to live; references to anything
// else are refused rather than loaded from disk or the network.
const schemaURL = "https://turnstile.invalid/schema.json"

// Validator checks values against JSON Schemas, compiling each distinct
// schema once. It is safe for concurrent use; create it with New.
type Validator struct {
	mu       sync.RWMutex
	cache    map[[sha256.Size]byte]*jsonschema.Schema
	compiles int // how many schemas were compiled, for tests
}

var _ runtime.Validator = (*Validator)(nil)

// New returns an empty Validator.
func New() *Validator {
	return &Validator{cache: map[[sha256.Size]byte]*jsonschema.Schema{}}
}

// Errors checks value against schema. It returns nil for a valid value, else
// one plain-English message per top-level property ("is required", "must be
// an integer"), with the key "" for messages about the value as a whole. It
// returns an error, and no map, when the schema is not JSON or does not
// compile, or when value is not JSON.
func (v *Validator) Errors(schema, value json.RawMessage) (map[string]string, error) {
	sch, err := v.compile(schema)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(value))
	if err != nil {
		return nil, fmt.Errorf("schema: the value is not JSON: %w", err)
	}
	err = sch.Validate(doc)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, fmt.Errorf("schema: validate: %w", err)
	}
	msgs := map[string]string{}
	collect(ve, msgs)
	if len(msgs) == 0 {
		msgs[""] = "is not valid"
	}
	return msgs, nil
}

// FromForm reads a submitted form by the schema: see the package's
// FromForm. It is here so that the engine reads its forms through the
// Validator it was given.
func (v *Validator) FromForm(schema json.RawMessage, form map[string][]string) (json.RawMessage, map[string]string) {
	return FromForm(schema, form)
}

func (v *Validator) compile(schema json.RawMessage) (*jsonschema.Schema, error) {
	key := sha256.Sum256(schema)
	v.mu.RLock()
	sch, ok := v.cache[key]
	v.mu.RUnlock()
	if ok {
		return sch, nil
	}

	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("schema: the schema is not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	// A person typing an answer expects "format": "email" to be checked,
	// although draft 2020-12 makes formats annotations only.
	c.AssertFormat()
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("schema: compile: %w", err)
	}
	sch, err = c.Compile(schemaURL)
	if err != nil {
		return nil, fmt.Errorf("schema: compile: %w", err)
	}

	v.mu.Lock()
	defer v.mu.Unlock()
	if cached, ok := v.cache[key]; ok {
		return cached, nil // another goroutine compiled it meanwhile
	}
	if len(v.cache) >= maxCached {
		clear(v.cache)
	}
	v.cache[key] = sch
	v.compiles++
	return sch, nil
}

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("schema: %s: references outside the schema are not loaded", url)
}

var printer = message.NewPrinter(language.English)

// collect walks a validation error down to the failures that say something
// to a person and keeps the first message per top-level property.
func collect(e *jsonschema.ValidationError, msgs map[string]string) {
	loc := e.InstanceLocation
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		for _, c := range e.Causes {
			collect(c, msgs)
		}
		if len(e.Causes) == 0 {
			add(msgs, loc, "is not valid")
		}
	case *kind.Required:
		for _, name := range k.Missing {
			add(msgs, append(loc[:len(loc):len(loc)], name), "is required")
		}
	case *kind.Dependency:
		for _, name := range k.Missing {
			add(msgs, append(loc[:len(loc):len(loc)], name), fmt.Sprintf("is required when %s is given", k.Prop))
		}
	case *kind.DependentRequired:
		for _, name := range k.Missing {
			add(msgs, append(loc[:len(loc):len(loc)], name), fmt.Sprintf("is required when %s is given", k.Prop))
		}
	case *kind.AdditionalProperties:
		for _, name := range k.Properties {
			add(msgs, append(loc[:len(loc):len(loc)], name), "is not allowed")
		}
	default:
		add(msgs, loc, describe(e.ErrorKind))
	}
}

// add files msg under the top-level property of path; deeper paths go into
// the message ("zip: must be a string").
func add(msgs map[string]string, path []string, msg string) {
	key := ""
	if len(path) > 0 {
		key = path[0]
		if len(path) > 1 {
			msg = strings.Join(path[1:], ".") + ": " + msg
		}
	}
	if _, ok := msgs[key]; !ok {
		msgs[key] = msg
	}
}

// describe says in plain English what a failed keyword wants.
func describe(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return "must be " + typeNames(k.Want)
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = display(w)
		}
		return "must be one of: " + strings.Join(want, ", ")
	case *kind.Const:
		return "must be " + display(k.Want)
	case *kind.Minimum:
		return "must be at least " + number(k.Want)
	case *kind.Maximum:
		return "must be at most " + number(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be greater than " + number(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be less than " + number(k.Want)
	case *kind.MultipleOf:
		return "must be a multiple of " + number(k.Want)
	case *kind.MinLength:
		if k.Want == 1 {
			return "must not be empty"
		}
		return "must be at least " + count(k.Want, "character") + " long"
	case *kind.MaxLength:
		return "must be at most " + count(k.Want, "character") + " long"
	case *kind.Pattern:
		return "must match the pattern " + k.Want
	case *kind.Format:
		return "must be a valid " + k.Want
	case *kind.MinItems:
		return "must have at least " + count(k.Want, "item")
	case *kind.MaxItems:
		return "must have at most " + count(k.Want, "item")
	case *kind.UniqueItems:
		return "must not repeat an item"
	case *kind.MinProperties:
		return "must have at least " + count(k.Want, "field")
	case *kind.MaxProperties:
		return "must have at most " + count(k.Want, "field")
	case *kind.PropertyNames:
		return fmt.Sprintf("may not have a field named %q", k.Property)
	case *kind.AnyOf:
		return "does not match any of the allowed forms"
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			return "does not match any of the allowed forms"
		}
		return "matches more than one of the allowed forms"
	case *kind.Not, *kind.FalseSchema:
		return "is not allowed"
	default:
		return k.LocalizedString(printer)
	}
}

func typeNames(want []string) string {
	if len(want) == 1 && want[0] == "boolean" {
		return "true or false"
	}
	// "a string or null" reads better than the library's sorted order.
	ordered := make([]string, 0, len(want))
	for _, w := range want {
		if w != "null" {
			ordered = append(ordered, w)
		}
	}
	if len(ordered) < len(want) {
		ordered = append(ordered, "null")
	}
	names := make([]string, len(ordered))
	for i, w := range ordered {
		switch w {
		case "integer":
			names[i] = "an integer"
		case "number":
			names[i] = "a number"
		case "string":
			names[i] = "a string"
		case "boolean":
			names[i] = "a boolean"
		case "object":
			names[i] = "an object"
		case "array":
			names[i] = "a list"
		default:
			names[i] = w
		}
	}
	return strings.Join(names, " or ")
}

// display writes an enum or const value as a person would type it.
func display(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func number(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'f', -1, 64)
}

func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
