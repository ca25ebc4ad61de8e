package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// maxAPIBytes bounds every JSON API body.
const maxAPIBytes = 1 << 20

// decodeJSON reads a JSON body into dst strictly, once, as it arrives (see
// decodeBody): at most maxAPIBytes, valid UTF-8, no unknown fields, no key
// twice or in another case than its field's, no trailing data, within the
// body's limits (limitedBody, else defaultLimits). Its errors are
// refusals a person can act on, but for a body struct it cannot fill.
func decodeJSON(w http.ResponseWriter, r *http.Request, dst any) error {
	limits := defaultLimits
	if b, ok := dst.(limitedBody); ok {
		limits = b.bodyLimits()
	}
	err := decodeBody(&utf8Reader{r: http.MaxBytesReader(w, r.Body, maxAPIBytes)}, dst, limits)
	var tooLarge *http.MaxBytesError
	var ref *runtime.Refusal
	var strict *runtime.JSONError
	var syntax *json.SyntaxError
	var mistake *bodyTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooLarge):
		return errTooLarge
	case errors.Is(err, errNotUTF8):
		return invalid("the body is not valid UTF-8")
	case errors.As(err, &ref), errors.As(err, &mistake):
		return err
	case errors.As(err, &strict):
		return invalidBody(strict.Error())
	case errors.As(err, &syntax):
		return invalidBody(fmt.Sprintf("malformed JSON at byte %d", syntax.Offset))
	case errors.Is(err, io.EOF):
		return invalidBody("the body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalidBody("the JSON ends too early")
	}
	return invalid("the body could not be read")
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
func (s *Server) runParam(w http.ResponseWriter, r *http.Request, sf surface, ps httprouter.Params) (int64, bool) {
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
