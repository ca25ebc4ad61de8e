package runtime

import "encoding/json"

// Validator checks a JSON value against a JSON Schema. Errors returns one
// message per top-level field (the key "" for the value as a whole); a nil
// map means the value is valid. An error means the schema itself is broken.
type Validator interface {
	Errors(schema json.RawMessage, value json.RawMessage) (map[string]string, error)
}
