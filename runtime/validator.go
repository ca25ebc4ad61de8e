package runtime

import "encoding/json"

// Validator reads values by a JSON Schema.
type Validator interface {
	// Errors checks a JSON value against a schema. It returns one message
	// per top-level field (the key "" for the value as a whole); a nil
	// map means the value is valid. An error means the schema itself is
	// broken.
	Errors(schema json.RawMessage, value json.RawMessage) (map[string]string, error)
	// FromForm reads a posted form (values by field name) as the JSON
	// object the schema describes, and a message per field whose value
	// does not even parse (text in a number field), nil when all did;
	// the object is then checked with Errors. A schema that cannot be
	// read gives no object and a message under "".
	FromForm(schema json.RawMessage, form map[string][]string) (json.RawMessage, map[string]string)
}
