package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Agents over HTTP (SPEC §12.1): anyone signed in lists the agents a run
// may be started with; admins with agents:write store, read and switch
// off configurations with the very files and checks of config apply.

// Agents is what the agents routes need: the stored agents, and storing a
// configuration file as `turnstile config apply` does.
type Agents interface {
	// ActiveAgents lists the configurations a run may be started with.
	ActiveAgents(ctx context.Context) ([]runtime.Agent, error)
	// Agent returns one, active or not, or runtime.ErrNotFound.
	Agent(ctx context.Context, identifier string) (runtime.Agent, error)
	// ApplyAgent checks a configuration file as config apply does and,
	// when its identifier is identifier, stores it. A file with errors
	// (the identifier's mismatch among them) is a
	// *runtime.ConfigurationError with every one, and writes nothing.
	ApplyAgent(ctx context.Context, identifier string, data []byte) (runtime.AppliedAgent, error)
	// ExportAgent is what `turnstile config export` prints, or
	// runtime.ErrNotFound.
	ExportAgent(ctx context.Context, identifier string) ([]byte, error)
	// DeactivateAgent switches a configuration off, or returns
	// runtime.ErrNotFound.
	DeactivateAgent(ctx context.Context, identifier string) error
}

// maxAgentBytes bounds a configuration file sent to PUT
// /api/agents/:identifier, as maxAPIBytes does a JSON body.
const maxAgentBytes = maxAPIBytes

// Codes of the agents routes' refusals.
const (
	// codeInvalidConfiguration: the file does not pass config apply's
	// checks; fields lists every error with its line. Nothing was written.
	codeInvalidConfiguration runtime.Code = "invalid_configuration"
	// codeUnsupportedMediaType: a body of a type the route does not take.
	codeUnsupportedMediaType runtime.Code = "unsupported_media_type"
	// codeAdminsOnly: the caller is not an admin. The same answer for
	// every identifier, given before anything is read, so it tells
	// nothing of what exists.
	codeAdminsOnly runtime.Code = "admins_only"
)

var errAdminsOnly = &runtime.Refusal{Code: codeAdminsOnly, Message: "only admins manage agents"}

// agentJSON is an agent as the API shows it.
type agentJSON struct {
	Identifier  string   `json:"identifier"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tools       []string `json:"tools"`
	Version     int      `json:"version"`
	// Active is shown to admins only: the list holds active agents alone.
	Active *bool `json:"active,omitempty"`
}

func toAgentJSON(a runtime.Agent, admin bool) agentJSON {
	c := a.Configuration
	out := agentJSON{Identifier: c.Identifier, Name: c.Name, Description: c.Description, Tools: c.Tools, Version: a.Version}
	if out.Tools == nil {
		out.Tools = []string{}
	}
	if admin {
		active := c.Active
		out.Active = &active
	}
	return out
}

// apiAgents lists the active configurations.
func (s *Server) apiAgents(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ runtime.Actor) {
	list, err := s.agents.ActiveAgents(r.Context())
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	out := make([]agentJSON, len(list))
	for i, a := range list {
		out[i] = toAgentJSON(a, false)
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"agents": out})
}

// adminAgent runs h for admins only; everyone else gets errAdminsOnly
// before the body is read or anything looked up.
func (s *Server) adminAgent(h apiHandle) apiHandle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
		if actor.Role != runtime.RoleAdmin {
			s.refuse(w, r, s.at.api, 0, errAdminsOnly)
			return
		}
		h(w, r, ps, actor)
	}
}

// agentNotFound is the refusal for an unknown identifier.
func agentNotFound(identifier string) error {
	return &runtime.Refusal{Code: runtime.CodeNotFound, Message: fmt.Sprintf("no agent %q (see GET /api/agents)", identifier)}
}

// yamlTypes are the media types a configuration file may be sent as:
// application/yaml (RFC 9512) and the spellings in use before it.
var yamlTypes = []string{"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"}

func isYAML(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	for _, t := range yamlTypes {
		if mt == t {
			return true
		}
	}
	return false
}

// apiPutAgent stores a configuration file under its identifier.
func (s *Server) apiPutAgent(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ runtime.Actor) {
	identifier := ps.ByName("identifier")
	if !isYAML(r.Header.Get("Content-Type")) {
		s.refuse(w, r, s.at.api, 0, &runtime.Refusal{Code: codeUnsupportedMediaType,
			Message: "send the configuration file of turnstile config apply with Content-Type: application/yaml"})
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAgentBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		s.refuse(w, r, s.at.api, 0, errTooLarge)
		return
	}
	if err != nil {
		// The client went away mid-body; nothing to answer it.
		s.log.Debug("read agent body", "err", err)
		return
	}
	applied, err := s.agents.ApplyAgent(r.Context(), identifier, data)
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	warnings := applied.Warnings
	if warnings == nil {
		warnings = []runtime.LineMessage{}
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"agent": toAgentJSON(applied.Agent, true),
		"outcome": applied.Outcome, "warnings": warnings})
}

// apiGetAgent answers the configuration file (Accept: application/yaml,
// what config export prints) or, otherwise, the agent as JSON.
func (s *Server) apiGetAgent(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ runtime.Actor) {
	identifier := ps.ByName("identifier")
	if !acceptsYAML(r.Header.Get("Accept")) {
		a, err := s.agents.Agent(r.Context(), identifier)
		if errors.Is(err, runtime.ErrNotFound) {
			err = agentNotFound(identifier)
		}
		if err != nil {
			s.refuse(w, r, s.at.api, 0, err)
			return
		}
		s.writeJSON(w, http.StatusOK, map[string]any{"agent": toAgentJSON(a, true)})
		return
	}
	data, err := s.agents.ExportAgent(r.Context(), identifier)
	if errors.Is(err, runtime.ErrNotFound) {
		err = agentNotFound(identifier)
	}
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	w.Header().Set("Content-Type", "application/yaml; charset=utf-8")
	// It may hold a system prompt and a script: no copy stays in a cache.
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(data); err != nil {
		s.log.Debug("write response", "err", err)
	}
}

// acceptsYAML reports whether an Accept header names a YAML type.
func acceptsYAML(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		if isYAML(strings.TrimSpace(part)) {
			return true
		}
	}
	return false
}

// apiDeleteAgent switches a configuration off: runs under way go on,
// new runs and follow-ups are refused as for any inactive configuration.
func (s *Server) apiDeleteAgent(w http.ResponseWriter, r *http.Request, ps httprouter.Params, _ runtime.Actor) {
	identifier := ps.ByName("identifier")
	err := s.agents.DeactivateAgent(r.Context(), identifier)
	if errors.Is(err, runtime.ErrNotFound) {
		err = agentNotFound(identifier)
	}
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	a, err := s.agents.Agent(r.Context(), identifier)
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"agent": toAgentJSON(a, true)})
}

// noAgents stands in for Deps.Agents when there are none: no agent is
// listed or found, and nothing is stored.
type noAgents struct{}

func (noAgents) ActiveAgents(context.Context) ([]runtime.Agent, error) { return nil, nil }
func (noAgents) Agent(context.Context, string) (runtime.Agent, error) {
	return runtime.Agent{}, runtime.ErrNotFound
}
func (noAgents) ApplyAgent(_ context.Context, identifier string, _ []byte) (runtime.AppliedAgent, error) {
	return runtime.AppliedAgent{}, agentNotFound(identifier)
}
func (noAgents) ExportAgent(context.Context, string) ([]byte, error) { return nil, runtime.ErrNotFound }
func (noAgents) DeactivateAgent(context.Context, string) error       { return runtime.ErrNotFound }
