package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// anyScope is the scope of a route any valid token may call, whatever
// scopes it carries (GET /api/agents). A route that several scopes open
// names them separated by spaces, as OAuth does (GET /api/feed).
const anyScope = ""

// tokenHas reports whether the request may use a scope: its bearer token
// carries it, or it comes from a signed-in session.
func tokenHas(r *http.Request, scope string) bool {
	scopes, ok := r.Context().Value(scopesKey).([]string)
	return !ok || slices.Contains(scopes, scope)
}

// apiHandle is a JSON API handler that knows who asks.
type apiHandle func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor)

// api authenticates a JSON API request and checks the scope it needs. A
// request with an Authorization header is judged by its bearer token
// alone: 401 unless it is a valid token, 403 when the token lacks the
// scope. Without the header, a signed-in session may do everything its
// user may; 401 otherwise.
//
// Then it counts the request against what its user may have open at once
// (admitUser): 429 too_many_requests beyond.
func (s *Server) api(scope string, h apiHandle) httprouter.Handle {
	return s.apiRoute(scope, false, h)
}

// apiStream is api for a route that always answers with a stream, counted
// as one whatever the client accepts.
func (s *Server) apiStream(scope string, h apiHandle) httprouter.Handle {
	return s.apiRoute(scope, true, h)
}

func (s *Server) apiRoute(scope string, streams bool, h apiHandle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		actor, scopes, err := s.apiActor(w, r, scope)
		if err != nil {
			s.refuse(w, r, s.at.api, 0, err)
			return
		}
		release, err := s.admitUser(r, actor.ID, streams)
		defer release()
		if err != nil {
			s.refuse(w, r, s.at.api, 0, err)
			return
		}
		ctx := context.WithValue(r.Context(), actorKey, actor)
		if scopes != nil {
			ctx = context.WithValue(ctx, scopesKey, scopes)
		}
		h(w, r.WithContext(ctx), ps, actor)
	}
}

// apiActor is who asks. Its errors are the refusals 401 and 403, with
// their challenge set on w (RFC 6750), or the store's.
func (s *Server) apiActor(w http.ResponseWriter, r *http.Request, scope string) (runtime.Actor, []string, error) {
	if _, sent := r.Header["Authorization"]; sent {
		scheme, token, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		if !strings.EqualFold(scheme, "Bearer") || s.tokens == nil {
			return runtime.Actor{}, nil, unauthorized(w, `error="invalid_request"`, "the Authorization header must be \"Bearer tst_…\" with a token from turnstile token create")
		}
		u, scopes, err := s.tokens.Authenticate(r.Context(), strings.TrimSpace(token))
		if errors.Is(err, runtime.ErrTokenInvalid) {
			// Malformed, unknown, expired and revoked alike: the answer
			// tells a guesser nothing.
			return runtime.Actor{}, nil, unauthorized(w, `error="invalid_token"`, "the bearer token is not valid: it is malformed, unknown, expired or revoked")
		}
		if err != nil {
			return runtime.Actor{}, nil, err
		}
		if scope != anyScope && !slices.ContainsFunc(strings.Split(scope, " "), func(s string) bool { return slices.Contains(scopes, s) }) {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="turnstile", error="insufficient_scope", scope=%q`, scope))
			one, _, _ := strings.Cut(scope, " ")
			return runtime.Actor{}, nil, &runtime.Refusal{Code: codeInsufficientScope,
				Message: fmt.Sprintf("this token lacks the %s scope this route needs; create one with --scopes %s",
					strings.ReplaceAll(scope, " ", " or "), one)}
		}
		return u.Actor(), append([]string{}, scopes...), nil // never nil: a token's
	}
	id := s.sessions.GetInt64(r.Context(), sessionUser)
	if id == 0 {
		return runtime.Actor{}, nil, unauthorized(w, "", "send Authorization: Bearer with a token from turnstile token create, or sign in")
	}
	u, err := s.users.User(r.Context(), id)
	if errors.Is(err, runtime.ErrNotFound) {
		// The user was deleted while signed in.
		return runtime.Actor{}, nil, unauthorized(w, "", "sign in again")
	}
	if err != nil {
		return runtime.Actor{}, nil, err
	}
	return u.Actor(), nil, nil
}

// unauthorized is the refusal 401, its challenge set on w.
func unauthorized(w http.ResponseWriter, params, message string) error {
	challenge := `Bearer realm="turnstile"`
	if params != "" {
		challenge += ", " + params
	}
	w.Header().Set("WWW-Authenticate", challenge)
	return &runtime.Refusal{Code: codeUnauthorized, Message: message}
}
