package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Agents over HTTP (web/agents.go, agents.go): two serve processes on one
// database; what one stores, the other uses for the next run.

// helperYAML is a configuration whose runs answer at once with answer.
func helperYAML(answer string) string {
	return fmt.Sprintf(`identifier: helper
name: Helper
description: Answers questions about orders.
provider:
  type: scripted
  script:
    rounds:
      - text: %q
tools: [lookup_order]
`, answer)
}

// agentCall is one answer of the API, read to its end.
type agentCall struct {
	status int
	header http.Header
	body   []byte
}

// call sends a request to an instance with a bearer token and a raw body
// of a content type (none when contentType is "").
func call(t *testing.T, s *server, token, method, path, contentType, accept, body string) agentCall {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return agentCall{resp.StatusCode, resp.Header, b}
}

// decode reads the answer's JSON into v, or fails the test.
func (a agentCall) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("answer %d %s: %v", a.status, a.body, err)
	}
}

// errorCode is the code of an error answer.
func (a agentCall) errorCode(t *testing.T) string {
	t.Helper()
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	a.decode(t, &e)
	return e.Error.Code
}

type agentAnswer struct {
	Identifier  string   `json:"identifier"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tools       []string `json:"tools"`
	Version     int      `json:"version"`
	Active      *bool    `json:"active"`
}

// listAgents is GET /api/agents.
func listAgents(t *testing.T, s *server, token string) map[string]agentAnswer {
	t.Helper()
	got := call(t, s, token, http.MethodGet, "/api/agents", "", "", "")
	if got.status != http.StatusOK {
		t.Fatalf("GET /api/agents = %d %s, want 200", got.status, got.body)
	}
	var body struct{ Agents []agentAnswer }
	got.decode(t, &body)
	out := map[string]agentAnswer{}
	for _, a := range body.Agents {
		out[a.Identifier] = a
	}
	return out
}

// startHelper starts a run of helper and returns the answer's status and
// body.
func startHelper(t *testing.T, s *server, token string) agentCall {
	t.Helper()
	return call(t, s, token, http.MethodPost, "/api/runs", "application/json", "", `{"configuration":"helper","prompt":"What about ORD-1?"}`)
}

// stored is the row of a configuration: its version and definition.
func stored(t *testing.T, r *rig, identifier string) (int, string) {
	t.Helper()
	var row struct {
		Version    int    `db:"version"`
		Definition string `db:"definition"`
	}
	if err := r.DB.Get(&row, `SELECT version, definition FROM configurations WHERE identifier = ?`, identifier); err != nil {
		t.Fatal(err)
	}
	return row.Version, row.Definition
}

func agentToken(t *testing.T, r *rig, user string, scopes ...string) string {
	t.Helper()
	plain, _, err := r.Store.CreateToken(context.Background(), r.Actor(user).ID, scopes, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return plain
}

func TestAgentsOverHTTP(t *testing.T) {
	r := newRig(t, helperYAML("Answer one."))
	a := startServe(t, r.DSN)
	b := startServe(t, r.DSN)
	admin := agentToken(t, r, "admin", runtime.ScopeAgentsWrite, runtime.ScopeRunStart)
	adminReader := agentToken(t, r, "admin", runtime.ScopeRunRead)
	// A non-admin's token may carry the scope; it still may not.
	user := agentToken(t, r, "owner", runtime.ScopeAgentsWrite, runtime.ScopeRunStart)

	// The list, for anyone, with any scope.
	for _, tok := range []string{admin, adminReader, user} {
		got := listAgents(t, b, tok)["helper"]
		if got.Name != "Helper" || got.Description != "Answers questions about orders." ||
			strings.Join(got.Tools, ",") != "lookup_order" || got.Version != 1 || got.Active != nil {
			t.Errorf("GET /api/agents: helper = %+v, want Helper, its description, [lookup_order], version 1, no active", got)
		}
	}
	// A signed-in session lists them too, and may not manage them.
	session := signIn(t, b.addr, "owner")
	if status, body := session.get(t, "/api/agents"); status != http.StatusOK || !strings.Contains(body, `"identifier":"helper"`) {
		t.Errorf("GET /api/agents with a session = %d %s, want 200 listing helper", status, body)
	}
	if status, body := session.get(t, "/api/agents/helper"); status != http.StatusForbidden || !strings.Contains(body, "admins_only") {
		t.Errorf("GET /api/agents/helper with a non-admin's session = %d %s, want 403 admins_only", status, body)
	}
	if got := startHelper(t, b, admin); got.status != http.StatusCreated || !strings.Contains(string(got.body), "Answer one.") {
		t.Fatalf("first run = %d %s, want 201 with Answer one.", got.status, got.body)
	}

	// Refusals, each before anything is read or written.
	v1, def1 := stored(t, r, "helper")
	refused := []struct {
		name, token, method, path, contentType string
		status                                 int
		code                                   string
	}{
		{"non-admin PUT", user, http.MethodPut, "/api/agents/helper", "application/yaml", http.StatusForbidden, "admins_only"},
		{"non-admin GET", user, http.MethodGet, "/api/agents/helper", "", http.StatusForbidden, "admins_only"},
		{"non-admin DELETE", user, http.MethodDelete, "/api/agents/helper", "", http.StatusForbidden, "admins_only"},
		{"non-admin, unknown agent", user, http.MethodGet, "/api/agents/nothing-here", "", http.StatusForbidden, "admins_only"},
		{"no agents:write", adminReader, http.MethodPut, "/api/agents/helper", "application/yaml", http.StatusForbidden, "insufficient_scope"},
		{"JSON body", admin, http.MethodPut, "/api/agents/helper", "application/json", http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"no content type", admin, http.MethodPut, "/api/agents/helper", "", http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"unknown GET", admin, http.MethodGet, "/api/agents/nothing-here", "", http.StatusNotFound, "not_found"},
		{"unknown DELETE", admin, http.MethodDelete, "/api/agents/nothing-here", "", http.StatusNotFound, "not_found"},
	}
	for _, c := range refused {
		got := call(t, a, c.token, c.method, c.path, c.contentType, "", helperYAML("Refused."))
		if got.status != c.status || got.errorCode(t) != c.code {
			t.Errorf("%s: %s %s = %d %s, want %d %s", c.name, c.method, c.path, got.status, got.body, c.status, c.code)
		}
	}
	if got := call(t, a, admin, http.MethodPut, "/api/agents/helper", "application/yaml", "",
		"identifier: helper\nsystem_prompt: \""+strings.Repeat("x", 2<<20)+"\"\n"); got.status != http.StatusRequestEntityTooLarge {
		t.Errorf("PUT of 2 MiB = %d %s, want 413", got.status, got.body)
	}

	// An invalid file: every error with its line, the identifier's
	// mismatch among them, and nothing written.
	invalid := `identifier: other
name: Helper
provider:
  type: scripted
  script:
    rounds:
      - text: "x"
tools: [lookup_order, no_such_tool]
colour: blue
max_iterations: 99
policy:
  - name: r
    when: owner.nmae == "x"
    then: {votes: 1}
`
	got := call(t, a, admin, http.MethodPut, "/api/agents/helper", "application/yaml; charset=utf-8", "", invalid)
	var invalidBody struct {
		Error struct {
			Code   string
			Fields []runtime.LineMessage
		}
	}
	got.decode(t, &invalidBody)
	if got.status != http.StatusUnprocessableEntity || invalidBody.Error.Code != "invalid_configuration" {
		t.Fatalf("PUT invalid = %d %s, want 422 invalid_configuration", got.status, got.body)
	}
	wantLines := map[int]string{1: `"other"`, 8: "no_such_tool", 9: "colour", 10: "max_iterations",
		13: "policy rule 1: when: undefined field 'nmae'", 14: "policy rule 1: votes must be 2 or more"}
	seen := map[int]bool{}
	for _, f := range invalidBody.Error.Fields {
		if want, ok := wantLines[f.Line]; ok && strings.Contains(f.Message, want) {
			seen[f.Line] = true
		}
		if strings.HasPrefix(f.Message, "body:") {
			t.Errorf("field %+v keeps the file's prefix", f)
		}
	}
	for line, want := range wantLines {
		if !seen[line] {
			t.Errorf("PUT invalid: no error on line %d naming %s in %+v", line, want, invalidBody.Error.Fields)
		}
	}
	if v, def := stored(t, r, "helper"); v != v1 || def != def1 {
		t.Errorf("after a refused PUT: version %d, definition changed %t; want %d, unchanged", v, def != def1, v1)
	}
	if n := r.Count(t, `SELECT COUNT(*) FROM configurations WHERE identifier = 'other'`); n != 0 {
		t.Errorf("a refused PUT stored %d configuration(s) named other", n)
	}

	// A valid one through A, with a warning config apply would give too.
	v2 := helperYAML("Answer two.") + "notify:\n  - url: https://hooks.example.com/turnstile\n    secret_env: AGENTS_TEST_UNSET_SECRET\n"
	got = call(t, a, admin, http.MethodPut, "/api/agents/helper", "application/yaml", "", v2)
	var put struct {
		Agent    agentAnswer
		Outcome  string
		Warnings []runtime.LineMessage
	}
	got.decode(t, &put)
	if got.status != http.StatusOK || put.Agent.Version != 2 || put.Outcome != "updated" || put.Agent.Active == nil || !*put.Agent.Active {
		t.Fatalf("PUT valid = %d %s, want 200, updated, version 2, active", got.status, got.body)
	}
	if len(put.Warnings) != 1 || put.Warnings[0].Line != 12 || !strings.Contains(put.Warnings[0].Message, "AGENTS_TEST_UNSET_SECRET is unset") {
		t.Errorf("PUT valid: warnings %+v, want one on line 12 (secret_env) about AGENTS_TEST_UNSET_SECRET", put.Warnings)
	}

	// B, never restarted, starts the next run with the new version.
	if got := listAgents(t, b, user)["helper"]; got.Version != 2 {
		t.Errorf("GET /api/agents on B after the PUT on A: version %d, want 2", got.Version)
	}
	if got := startHelper(t, b, admin); got.status != http.StatusCreated || !strings.Contains(string(got.body), "Answer two.") {
		t.Fatalf("run on B after the PUT on A = %d %s, want 201 with Answer two.", got.status, got.body)
	}

	// The file, as config export prints it, is accepted again unchanged.
	got = call(t, b, admin, http.MethodGet, "/api/agents/helper", "", "application/yaml", "")
	export := runBinary(t, childEnv(), "config", "export", "helper", "--dsn", r.DSN)
	if got.status != http.StatusOK || !strings.HasPrefix(got.header.Get("Content-Type"), "application/yaml") || export.code != 0 || string(got.body) != export.stdout {
		t.Fatalf("GET yaml = %d %q\n%s\nwant 200 application/yaml, exactly config export's (exit %d):\n%s", got.status, got.header.Get("Content-Type"), got.body, export.code, export.stdout)
	}
	again := call(t, a, admin, http.MethodPut, "/api/agents/helper", "application/yaml", "", string(got.body))
	var againBody struct {
		Agent   agentAnswer
		Outcome string
	}
	again.decode(t, &againBody)
	if again.status != http.StatusOK || againBody.Outcome != "unchanged" || againBody.Agent.Version != 2 {
		t.Errorf("PUT of the export = %d %s, want 200 unchanged at version 2", again.status, again.body)
	}
	jsonGot := call(t, b, admin, http.MethodGet, "/api/agents/helper", "", "", "")
	var one struct{ Agent agentAnswer }
	jsonGot.decode(t, &one)
	if jsonGot.status != http.StatusOK || one.Agent.Version != 2 || one.Agent.Description != "Answers questions about orders." {
		t.Errorf("GET JSON = %d %s, want 200 with version 2", jsonGot.status, jsonGot.body)
	}

	// DELETE through A switches it off for B too.
	got = call(t, a, admin, http.MethodDelete, "/api/agents/helper", "", "", "")
	var deleted struct{ Agent agentAnswer }
	got.decode(t, &deleted)
	if got.status != http.StatusOK || deleted.Agent.Active == nil || *deleted.Agent.Active {
		t.Fatalf("DELETE = %d %s, want 200 with active false", got.status, got.body)
	}
	if _, listed := listAgents(t, b, user)["helper"]; listed {
		t.Error("GET /api/agents on B still lists helper after DELETE on A")
	}
	if got := startHelper(t, b, admin); got.status != http.StatusConflict || got.errorCode(t) != string(runtime.CodeInactiveConfiguration) {
		t.Errorf("run on B after DELETE on A = %d %s, want 409 inactive_configuration", got.status, got.body)
	}
	// PUT switches it on again, at the same version: the definition is
	// the same.
	got = call(t, a, admin, http.MethodPut, "/api/agents/helper", "application/yaml", "", string(exportSwitchedOn(t, b, admin)))
	got.decode(t, &put)
	if got.status != http.StatusOK || put.Outcome != "updated" || put.Agent.Version != 2 || put.Agent.Active == nil || !*put.Agent.Active {
		t.Errorf("PUT after DELETE = %d %s, want 200 updated, active, version 2", got.status, got.body)
	}
}

// exportSwitchedOn is the YAML export of helper with active: true, as a
// person switching it on again would send it.
func exportSwitchedOn(t *testing.T, s *server, token string) []byte {
	t.Helper()
	got := call(t, s, token, http.MethodGet, "/api/agents/helper", "", "application/yaml", "")
	if got.status != http.StatusOK || !strings.Contains(string(got.body), "active: false") {
		t.Fatalf("GET yaml of a deactivated agent = %d %s, want 200 with active: false", got.status, got.body)
	}
	return []byte(strings.Replace(string(got.body), "active: false", "active: true", 1))
}
