package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// MaxJSONDepth bounds how deeply a value a person sends may nest: deeper
// than any form or schema needs, far below what would cost real stack.
const MaxJSONDepth = 64

// JSONError says what is wrong with a JSON value a person sent, and where.
type JSONError struct {
	// Path is the keys and indexes from the top to the offending value;
	// empty for the value as a whole.
	Path    []string
	Problem string
}

func (e *JSONError) Error() string {
	if len(e.Path) == 0 {
		return e.Problem
	}
	return fmt.Sprintf("%s %s", strings.Join(e.Path, "."), e.Problem)
}

// DecodeStrict reads exactly one JSON value into maps, slices, strings,
// booleans, nil and json.Number, refusing what encoding/json lets pass: an
// object that gives a key twice (encoding/json keeps the last value, so a
// check and a store could see different values) and nesting deeper than 64
// levels. Its errors are *JSONError, or the decoder's own for text that is
// not JSON.
func DecodeStrict(doc []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	v, err := decodeValue(dec, nil)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &JSONError{Problem: "has data after its JSON value"}
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, path []string) (any, error) {
	if len(path) > MaxJSONDepth {
		return nil, &JSONError{Path: path, Problem: fmt.Sprintf("nests deeper than %d levels", MaxJSONDepth)}
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		m := map[string]any{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string) // the decoder yields only strings as keys
			at := append(path[:len(path):len(path)], k)
			if _, dup := m[k]; dup {
				return nil, &JSONError{Path: at, Problem: "is given twice"}
			}
			if m[k], err = decodeValue(dec, at); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token() // '}'
		return m, err
	case json.Delim('['):
		a := []any{}
		for dec.More() {
			v, err := decodeValue(dec, append(path[:len(path):len(path)], strconv.Itoa(len(a))))
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token() // ']'
		return a, err
	}
	return tok, nil
}

// NormalizeJSON is how a value a person typed enters the system: read
// strictly (DecodeStrict), every number within range — an integer within
// int64, any other number within float64, so that every consumer reads
// the value that was checked — and written again compactly with sorted
// keys. What is validated, stored and handed on is its result, never the
// bytes that were sent. Its errors are as DecodeStrict's.
func NormalizeJSON(doc []byte) (json.RawMessage, error) {
	v, err := DecodeStrict(doc)
	if err != nil {
		return nil, err
	}
	if err := checkNumbers(v, nil); err != nil {
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("runtime: encode json: %w", err)
	}
	return out, nil
}

func checkNumbers(v any, path []string) error {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if err := checkNumbers(e, append(path[:len(path):len(path)], k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range v {
			if err := checkNumbers(e, append(path[:len(path):len(path)], strconv.Itoa(i))); err != nil {
				return err
			}
		}
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			if _, err := strconv.ParseInt(s, 10, 64); err != nil {
				return &JSONError{Path: path, Problem: "is an integer out of range (at most 19 digits, ±9223372036854775807)"}
			}
			return nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0) {
			return &JSONError{Path: path, Problem: "is a number out of range"}
		}
	}
	return nil
}
