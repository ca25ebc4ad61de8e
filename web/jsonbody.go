package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// maxAPIBytes bounds every JSON API body.
const maxAPIBytes = 1 << 20

// decodeJSON reads a JSON body strictly: at most maxAPIBytes, valid UTF-8,
// no unknown fields, no trailing data. Its errors are refusals a person can
// act on.
func decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAPIBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return errTooLarge
		}
		return invalid("the body could not be read")
	}
	if !utf8.Valid(body) {
		return &runtime.Refusal{Code: runtime.CodeInvalidRequest, Message: "the body is not valid UTF-8"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return &runtime.Refusal{Code: runtime.CodeInvalidRequest, Message: "the body is not the JSON this route takes: " + jsonProblem(err)}
	}
	// More would miss a stray ] or }: only the end of the body may follow.
	if _, err := dec.Token(); err != io.EOF {
		return &runtime.Refusal{Code: runtime.CodeInvalidRequest, Message: "the body has data after its JSON object"}
	}
	// encoding/json keeps the last of two equal keys and matches field
	// names without regard to case: read again, strictly, so that what
	// was decoded is the only reading the body has.
	tree, err := runtime.DecodeStrict(body)
	if err != nil {
		return &runtime.Refusal{Code: runtime.CodeInvalidRequest, Message: "the body is not the JSON this route takes: " + err.Error()}
	}
	if field := inexactField(tree, reflect.TypeOf(dst)); field != "" {
		return &runtime.Refusal{Code: runtime.CodeInvalidRequest, Message: "the body is not the JSON this route takes: " +
			jsonProblem(fmt.Errorf("json: unknown field %q", field))}
	}
	return nil
}

// inexactField returns a key of v that names a field of t only when case
// is ignored, or "" when every key of every object decoded into a struct
// is its field's exact name. v is what DecodeStrict read.
func inexactField(v any, t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			fields[name] = f.Type
		}
		for k, e := range m {
			ft, ok := fields[k]
			if !ok {
				return k
			}
			if bad := inexactField(e, ft); bad != "" {
				return bad
			}
		}
	case reflect.Slice, reflect.Array:
		a, _ := v.([]any)
		for _, e := range a {
			if bad := inexactField(e, t.Elem()); bad != "" {
				return bad
			}
		}
	}
	return ""
}

// jsonProblem says what is wrong with a JSON body in words.
func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("malformed JSON at byte %d", syntax.Offset)
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Sprintf("the body must be a JSON object, not %s", typ.Value)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q must be %s, not %s", typ.Field, jsonType(typ.Type.Kind()), typ.Value)
	case errors.Is(err, io.EOF):
		return "the body is empty; send a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too early"
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Sprintf("unknown field %s; this route takes only the fields its documentation names (GET /api/openapi.json)", field)
	}
	return err.Error()
}

// jsonType names a Go kind as JSON calls it.
func jsonType(k reflect.Kind) string {
	switch k {
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// decodeTurn decodes the body of a decision about a turn (decodeJSON), then
// checks the turn digest it names.
func decodeTurn(w http.ResponseWriter, r *http.Request, dst any, digest *string) error {
	if err := decodeJSON(w, r, dst); err != nil {
		return err
	}
	return checkDigest(*digest)
}

var digestForm = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkDigest refuses a missing or malformed turn digest before anything
// is read: without one, a decision could only lose its claim.
func checkDigest(digest string) error {
	switch {
	case digest == "":
		return invalid("turn_digest is required: the digest of the pending turn you decide, from GET /api/approvals or GET /api/runs/{id}")
	case !digestForm.MatchString(digest):
		return invalid("turn_digest must be 64 lowercase hex digits, as GET /api/approvals gives it")
	}
	return nil
}

func invalid(message string) error {
	return &runtime.Refusal{Code: runtime.CodeInvalidRequest, Message: message}
}

// unknownRun is the refusal for a run id that names no run the caller may
// see, a malformed one included.
func unknownRun(ps httprouter.Params) error {
	msg := fmt.Sprintf("no run %s", ps.ByName("id"))
	if _, ok := runID(ps); !ok {
		msg = fmt.Sprintf("no run %q: run ids are positive integers, written without a sign or leading zeros", ps.ByName("id"))
	}
	return &runtime.Refusal{Code: runtime.CodeNotFound, Message: msg}
}

// runParam reads the run of a route, or refuses it on the surface as no
// run at all.
func (s *Server) runParam(w http.ResponseWriter, r *http.Request, sf *surface, ps httprouter.Params) (int64, bool) {
	id, ok := runID(ps)
	if !ok {
		s.refuse(w, r, sf, 0, unknownRun(ps))
	}
	return id, ok
}

// runID reads the :id of a route; a malformed one is no run at all. Only
// the canonical form names a run: "+5" and "05" are not run 5, so one run
// has one address.
func runID(ps httprouter.Params) (int64, bool) {
	s := ps.ByName("id")
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0 && strconv.FormatInt(id, 10) == s
}
