package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
)

// maxAPIBytes bounds every JSON API body.
const maxAPIBytes = 1 << 20

// apiHandle is a JSON API handler that knows who asks.
type apiHandle func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor)

// Token scopes; the store keeps the list a token may carry.
const (
	ScopeRunStart  = store.ScopeRunStart
	ScopeRunRead   = store.ScopeRunRead
	ScopeRunDecide = store.ScopeRunDecide
	ScopeRunCancel = store.ScopeRunCancel
)

// api authenticates a JSON API request and checks the scope it needs. A
// request with an Authorization header is judged by its bearer token
// alone: 401 unless it is a valid token, 403 when the token lacks the
// scope. Without the header, a signed-in session may do everything its
// user may; 401 otherwise.
func (s *Server) api(scope string, h apiHandle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		actor, ok := s.apiActor(w, r, scope)
		if !ok {
			return
		}
		h(w, r, ps, actor)
	}
}

// apiActor is who asks, or false when the request was answered with 401,
// 403 or 500.
func (s *Server) apiActor(w http.ResponseWriter, r *http.Request, scope string) (runtime.Actor, bool) {
	if _, sent := r.Header["Authorization"]; sent {
		scheme, token, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		if !strings.EqualFold(scheme, "Bearer") || s.tokens == nil {
			s.unauthorized(w, r, `error="invalid_request"`, "the Authorization header must be \"Bearer tst_…\" with a token from turnstile token create")
			return runtime.Actor{}, false
		}
		u, scopes, err := s.tokens.Authenticate(r.Context(), strings.TrimSpace(token))
		if errors.Is(err, store.ErrTokenInvalid) {
			// Malformed, unknown, expired and revoked alike: the answer
			// tells a guesser nothing.
			s.unauthorized(w, r, `error="invalid_token"`, "the bearer token is not valid: it is malformed, unknown, expired or revoked")
			return runtime.Actor{}, false
		}
		if err != nil {
			s.apiFail(w, r, err)
			return runtime.Actor{}, false
		}
		if !slices.Contains(scopes, scope) {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="turnstile", error="insufficient_scope", scope=%q`, scope))
			s.apiError(w, r, http.StatusForbidden, "insufficient_scope",
				fmt.Sprintf("this token lacks the %s scope this route needs; create one with --scopes %s", scope, scope), nil)
			return runtime.Actor{}, false
		}
		return u.Actor(), true
	}
	id := s.sessions.GetInt64(r.Context(), sessionUser)
	if id == 0 {
		s.unauthorized(w, r, "", "send Authorization: Bearer with a token from turnstile token create, or sign in")
		return runtime.Actor{}, false
	}
	u, err := s.users.User(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		// The user was deleted while signed in.
		s.unauthorized(w, r, "", "sign in again")
		return runtime.Actor{}, false
	}
	if err != nil {
		s.apiFail(w, r, err)
		return runtime.Actor{}, false
	}
	return u.Actor(), true
}

// unauthorized answers 401 with the challenge of RFC 6750.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, params, message string) {
	challenge := `Bearer realm="turnstile"`
	if params != "" {
		challenge += ", " + params
	}
	w.Header().Set("WWW-Authenticate", challenge)
	s.apiError(w, r, http.StatusUnauthorized, "unauthorized", message, nil)
}

// apiStatus is the status of each refusal on the JSON surfaces (SPEC §4).
var apiStatus = map[runtime.Code]int{
	runtime.CodeNotFound:              http.StatusNotFound,
	runtime.CodeNotWaiting:            http.StatusConflict,
	runtime.CodeProcessRun:            http.StatusConflict,
	runtime.CodeInactiveConfiguration: http.StatusConflict,
	runtime.CodeFourEyes:              http.StatusForbidden,
	runtime.CodeUnreadableState:       http.StatusInternalServerError,
	runtime.CodeApproverNotPermitted:  http.StatusForbidden,
	runtime.CodeInvalidInput:          http.StatusUnprocessableEntity,
	runtime.CodeStaleTurn:             http.StatusConflict,
	runtime.CodeAlreadyResuming:       http.StatusConflict,
	runtime.CodeInvalidRequest:        http.StatusBadRequest,
}

// apiFail is the one place an error becomes a JSON API answer: a refusal
// gets its status and code; anything else is logged and answered 500
// without its text.
func (s *Server) apiFail(w http.ResponseWriter, r *http.Request, err error) {
	var ref *runtime.Refusal
	if errors.As(err, &ref) {
		s.metrics.refused(apiSurface(r), string(ref.Code))
		status, ok := apiStatus[ref.Code]
		if !ok {
			status = http.StatusBadRequest
		}
		extra := map[string]any{}
		if len(ref.Fields) > 0 {
			extra["fields"] = ref.Fields
		}
		if ref.Digest != "" {
			extra["turn_digest"] = ref.Digest
		}
		s.apiError(w, r, status, string(ref.Code), ref.Message, extra)
		return
	}
	s.log.Error("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	s.apiError(w, r, http.StatusInternalServerError, "internal", "something went wrong on our side", nil)
}

// apiError writes {"error":{"code":…,"message":…,…extra}}.
func (s *Server) apiError(w http.ResponseWriter, _ *http.Request, status int, code, message string, extra map[string]any) {
	e := map[string]any{"code": code, "message": message}
	for k, v := range extra {
		e[k] = v
	}
	s.writeJSON(w, status, map[string]any{"error": e})
}

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
		return &runtime.Refusal{Code: runtime.CodeInvalidRequest, Message: "the body could not be read"}
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

// errTooLarge is a body over the limit; callers answer 413.
var errTooLarge = errors.New("body too large")

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

// runJSON is a run as the API shows it.
type runJSON struct {
	ID            int64  `json:"id"`
	Configuration string `json:"configuration"`
	Status        string `json:"status"`
	Origin        string `json:"origin"`
	TurnDigest    string `json:"turn_digest,omitempty"`
	Reason        string `json:"termination_reason,omitempty"`
	Answer        string `json:"answer,omitempty"`
	Iterations    int    `json:"iterations"`
	InputTokens   int    `json:"input_tokens"`
	OutputTokens  int    `json:"output_tokens"`
	CreatedAt     string `json:"created_at"`
	UpdatedAt     string `json:"updated_at"`
}

func toRunJSON(r *runtime.Run, configuration string) runJSON {
	j := runJSON{ID: r.ID, Configuration: configuration, Status: string(r.Status), Origin: string(r.Origin),
		Reason: r.TerminationReason, Answer: r.Answer, Iterations: r.Iterations,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens,
		CreatedAt: r.CreatedAt.UTC().Format(timeFormat), UpdatedAt: r.UpdatedAt.UTC().Format(timeFormat)}
	if r.Status.Waiting() {
		// A digest names the turn that waits; once decided it names
		// nothing anyone can act on (the OpenAPI document says so).
		j.TurnDigest = r.TurnDigest
	}
	return j
}

const timeFormat = "2006-01-02T15:04:05.000000Z"
