package web

import (
	"context"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Credentials is what introspection needs of the store.
type Credentials interface {
	// IntrospectRunToken says who a run credential acts for, or
	// runtime.ErrTokenInvalid for any credential that is not live.
	IntrospectRunToken(ctx context.Context, token string) (*runtime.RunIdentity, error)
}

// maxIntrospectBytes bounds an introspection body: a credential and a
// little JSON or form around it.
const maxIntrospectBytes = 4 << 10

// introspection is the answer of POST /api/identity/introspect (RFC 7662)
// for a live credential; any other is answered inactive, and nothing
// more.
type introspection struct {
	Active        bool     `json:"active"`
	Sub           string   `json:"sub"`
	UserID        int64    `json:"user_id"`
	RunID         int64    `json:"run_id"`
	Configuration string   `json:"configuration"`
	Grants        []string `json:"grants"`
	Role          string   `json:"role"`
	Exp           int64    `json:"exp"`
}

// inactive is the answer for every credential that is not live.
type inactive struct {
	Active bool `json:"active"`
}

// apiIntrospect tells an internal MCP server who the run credential it was
// sent acts for. The caller's bearer token needs identity:introspect (a
// signed-in session is not enough: this is a server's route). Revoked,
// expired, unknown and malformed credentials all answer {"active":false}
// after the same one lookup.
func (s *Server) apiIntrospect(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ runtime.Actor) {
	if _, sent := r.Header["Authorization"]; !sent {
		s.refuse(w, r, s.at.api, 0, unauthorized(w, "", "introspection takes a bearer token with the scope "+runtime.ScopeIdentityIntrospect))
		return
	}
	token, err := introspectedToken(w, r)
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	var ans any = inactive{}
	if s.credentials != nil {
		id, err := s.credentials.IntrospectRunToken(r.Context(), token)
		switch {
		case err == nil:
			grants := id.User.Grants
			if grants == nil {
				grants = []string{}
			}
			ans = introspection{Active: true, Sub: id.User.Name, UserID: id.User.ID, RunID: id.RunID,
				Configuration: id.Configuration, Grants: grants, Role: string(id.User.Role), Exp: id.ExpiresAt.Unix()}
		case !errors.Is(err, runtime.ErrTokenInvalid):
			s.refuse(w, r, s.at.api, 0, err)
			return
		}
	}
	s.writeJSON(w, http.StatusOK, ans)
}

// introspectedToken reads the credential of an introspection: form
// "token=…" (RFC 7662) or JSON {"token":…}.
func introspectedToken(w http.ResponseWriter, r *http.Request) (string, error) {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/x-www-form-urlencoded" {
		r.Body = http.MaxBytesReader(w, r.Body, maxIntrospectBytes)
		if err := r.ParseForm(); err != nil {
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				return "", errTooLarge
			}
			return "", invalid("the form could not be read")
		}
		if tok := r.PostForm.Get("token"); tok != "" {
			return tok, nil
		}
		return "", invalid("send the credential as token=tsr_…")
	}
	var body struct {
		Token string `json:"token"`
		// TokenTypeHint is RFC 7662's optional hint; every credential
		// here is of one type, so it changes nothing.
		TokenTypeHint string `json:"token_type_hint"`
	}
	if err := decodeJSON(w, r, &body); err != nil {
		return "", err
	}
	if strings.TrimSpace(body.Token) == "" {
		return "", invalid(`send the credential as {"token":"tsr_…"}`)
	}
	return body.Token, nil
}
