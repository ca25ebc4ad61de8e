package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/turnstile-dev/turnstile/runtime"
)

// untouched is a ResponseWriter that records whether anything was
// written: decodeJSON only reads, and its caller chooses the answer.
type untouched struct {
	header http.Header
	wrote  bool
}

func (u *untouched) Header() http.Header {
	if u.header == nil {
		u.header = http.Header{}
	}
	return u.header
}
func (u *untouched) Write(b []byte) (int, error) { u.wrote = true; return len(b), nil }
func (u *untouched) WriteHeader(int)             { u.wrote = true }

// FuzzDecodeJSON feeds arbitrary bodies to decodeJSON for each request
// body of the API. It may refuse only with invalid_request (invalid_bulk
// for a bulk over its limit) or errTooLarge, writes nothing, and accepts
// exactly what encoding/json reads strictly: valid UTF-8, one JSON object
// (or null, which leaves the body empty for the route to refuse, as
// TestAPIBadInput pins) and no unknown field — with each key given once
// (runtime.DecodeStrict, tested on its own), in its field's exact case at
// every depth, and within the body's limits.
func FuzzDecodeJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecodeJSON[decisionBody](t, body)
		checkDecodeJSON[inputBody](t, body)
		checkDecodeJSON[startBody](t, body)
		checkDecodeJSON[bulkBody](t, body)
	})
}

func checkDecodeJSON[T any](t *testing.T, body []byte) {
	t.Helper()
	w := &untouched{}
	r := httptest.NewRequest(http.MethodPost, "/api/runs", bytes.NewReader(body))
	var got T
	err := decodeJSON(w, r, &got)
	if w.wrote || len(w.header) > 0 {
		t.Fatalf("decodeJSON[%T](%q) wrote to the response (headers %v)", got, body, w.header)
	}
	want, why := strictDecode[T](body)
	if err != nil {
		var ref *runtime.Refusal
		switch {
		case errors.Is(err, errTooLarge):
			if len(body) <= maxAPIBytes {
				t.Fatalf("decodeJSON[%T](%q) = errTooLarge for %d bytes, at most %d", got, body, len(body), maxAPIBytes)
			}
		case !errors.As(err, &ref) || (ref.Code != runtime.CodeInvalidRequest && ref.Code != codeInvalidBulk):
			t.Fatalf("decodeJSON[%T](%q) = %#v, want a refusal invalid_request (or invalid_bulk) or errTooLarge", got, body, err)
		case ref.Message == "" || !utf8.ValidString(ref.Message):
			t.Fatalf("decodeJSON[%T](%q) refused with the message %q, want readable text", got, body, ref.Message)
		}
		if why == "" {
			t.Fatalf("decodeJSON[%T](%q) = %v, but encoding/json reads it strictly as %+v", got, body, err, want)
		}
		return
	}
	if why != "" {
		t.Fatalf("decodeJSON[%T](%q) accepted %+v, but the body %s", got, body, got, why)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeJSON[%T](%q) = %+v, encoding/json reads %+v", got, body, got, want)
	}
}

// strictDecode reads body as decodeJSON promises to, with encoding/json
// alone; why says what disqualifies it, or is "".
func strictDecode[T any](body []byte) (v T, why string) {
	if len(body) > maxAPIBytes {
		return v, "is over the limit"
	}
	if !utf8.Valid(body) {
		return v, "is not valid UTF-8"
	}
	switch trimmed := bytes.TrimLeft(body, " \t\r\n"); {
	case bytes.HasPrefix(trimmed, []byte("{")):
	case bytes.HasPrefix(trimmed, []byte("null")):
	default:
		return v, "is not a JSON object"
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, "does not decode strictly: " + err.Error()
	}
	if _, err := dec.Token(); err != io.EOF {
		return v, "has more after its JSON value"
	}
	tree, err := runtime.DecodeStrict(body)
	if err != nil {
		return v, "gives a key twice or nests too deeply: " + err.Error()
	}
	if k := inexactKey(tree, reflect.TypeFor[T]()); k != "" {
		return v, "names a field in another case: " + k
	}
	limits := defaultLimits
	if b, ok := any(&v).(limitedBody); ok {
		limits = b.bodyLimits()
	}
	if n := countValues(tree); n > limits.values {
		return v, fmt.Sprintf("holds %d values, more than %d", n, limits.values)
	}
	if n := mostEntries(tree); limits.entries > 0 && n > limits.entries {
		return v, fmt.Sprintf("has an array or object of %d entries, more than %d", n, limits.entries)
	}
	return v, ""
}

// inexactKey is a key of a decoded tree that names no field of the struct
// it decodes into by its exact name (a field's name in another case, as
// encoding/json matches them), at any depth; "" when there is none.
func inexactKey(tree any, t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		m, _ := tree.(map[string]any)
		for k, e := range m {
			var ft reflect.Type
			for f := range t.Fields() {
				if strings.Split(f.Tag.Get("json"), ",")[0] == k {
					ft = f.Type
				}
			}
			if ft == nil {
				return k
			}
			if bad := inexactKey(e, ft); bad != "" {
				return bad
			}
		}
	case reflect.Slice:
		a, _ := tree.([]any)
		for _, e := range a {
			if bad := inexactKey(e, t.Elem()); bad != "" {
				return bad
			}
		}
	case reflect.Map:
		m, _ := tree.(map[string]any)
		for _, e := range m {
			if bad := inexactKey(e, t.Elem()); bad != "" {
				return bad
			}
		}
	}
	return ""
}

// countValues counts a decoded tree's values: itself, and every value of
// its objects and arrays at any depth.
func countValues(tree any) int {
	n := 1
	switch tree := tree.(type) {
	case map[string]any:
		for _, e := range tree {
			n += countValues(e)
		}
	case []any:
		for _, e := range tree {
			n += countValues(e)
		}
	}
	return n
}

// mostEntries is the most entries of an object or array in a decoded tree.
func mostEntries(tree any) int {
	most := 0
	switch tree := tree.(type) {
	case map[string]any:
		most = len(tree)
		for _, e := range tree {
			most = max(most, mostEntries(e))
		}
	case []any:
		most = len(tree)
		for _, e := range tree {
			most = max(most, mostEntries(e))
		}
	}
	return most
}

// TestDecodeJSONLimit covers the one kind of bad body the fuzzer does not
// reach: one over the limit is errTooLarge, one at it is read, and neither
// writes.
func TestDecodeJSONLimit(t *testing.T) {
	at := []byte(`{"prompt":"` + strings.Repeat("a", maxAPIBytes-len(`{"prompt":""}`)) + `"}`)
	tests := []struct {
		name    string
		body    []byte
		wantErr error
	}{
		{"at the limit", at, nil},
		{"one byte over", append(bytes.Clone(at), ' '), errTooLarge},
		{"far over", bytes.Repeat([]byte(" "), 4*maxAPIBytes), errTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &untouched{}
			var got startBody
			err := decodeJSON(w, httptest.NewRequest(http.MethodPost, "/api/runs", bytes.NewReader(tt.body)), &got)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("decodeJSON(%d bytes) = %v, want %v", len(tt.body), err, tt.wantErr)
			}
			if w.wrote || len(w.header) > 0 {
				t.Errorf("decodeJSON(%d bytes) wrote to the response (headers %v)", len(tt.body), w.header)
			}
		})
	}
}
