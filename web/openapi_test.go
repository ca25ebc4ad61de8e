package web_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/alexedwards/scs/v2"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/web"
)

// apiRoutes is every route of the JSON API with the scope it needs (""
// for a public one). TestOpenAPIDocumentsEveryRoute holds it against the
// router's source, the router itself and the OpenAPI document, both ways.
var apiRoutes = []struct{ method, path, scope string }{
	{http.MethodGet, "/api/openapi.json", ""},
	{http.MethodGet, "/api/approvals", runtime.ScopeRunRead},
	{http.MethodPost, "/api/runs", runtime.ScopeRunStart},
	{http.MethodGet, "/api/runs", runtime.ScopeRunRead},
	{http.MethodGet, "/api/runs/:id", runtime.ScopeRunRead},
	{http.MethodPatch, "/api/runs/:id", runtime.ScopeRunStart},
	{http.MethodDelete, "/api/runs/:id", runtime.ScopeRunCancel},
	{http.MethodGet, "/api/runs/:id/events", runtime.ScopeRunRead},
	{http.MethodGet, "/api/feed", runtime.ScopeRunRead + " " + runtime.ScopeRunDecide}, // either
	{http.MethodPost, "/api/runs/:id/messages", runtime.ScopeRunStart},
	{http.MethodGet, "/api/runs/:id/messages", runtime.ScopeRunRead},
	{http.MethodPost, "/api/runs/:id/decisions", runtime.ScopeRunDecide},
	{http.MethodPost, "/api/runs/:id/input", runtime.ScopeRunDecide},
	{http.MethodPost, "/api/decisions", runtime.ScopeRunDecide},
	{http.MethodGet, "/api/agents", ""},
	{http.MethodPut, "/api/agents/:identifier", runtime.ScopeAgentsWrite},
	{http.MethodGet, "/api/agents/:identifier", runtime.ScopeAgentsWrite},
	{http.MethodDelete, "/api/agents/:identifier", runtime.ScopeAgentsWrite},
	{http.MethodPost, "/api/identity/introspect", runtime.ScopeIdentityIntrospect},
}

// scopeConstants maps the names the router uses to scopes.
var scopeConstants = map[string]string{
	"ScopeRunStart": runtime.ScopeRunStart, "ScopeRunRead": runtime.ScopeRunRead,
	"ScopeRunDecide": runtime.ScopeRunDecide, "ScopeRunCancel": runtime.ScopeRunCancel,
	"ScopeAgentsWrite":        runtime.ScopeAgentsWrite,
	"ScopeIdentityIntrospect": runtime.ScopeIdentityIntrospect,
}

// routeKey names a route as "METHOD /path/{param}".
func routeKey(method, path string) string {
	return method + " " + regexp.MustCompile(`:([a-z_]+)`).ReplaceAllString(path, "{$1}")
}

// sourceRoutes finds every /api route the package registers: calls like
// r.GET("/api/…", s.api(runtime.ScopeRunRead, …)) (or s.apiStream) in its
// non-test files.
func sourceRoutes(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]string{"GET": "GET", "POST": "POST", "PUT": "PUT", "PATCH": "PATCH", "DELETE": "DELETE", "HEAD": "HEAD", "OPTIONS": "OPTIONS"}
	found := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			method, args := methods[sel.Sel.Name], call.Args
			if sel.Sel.Name == "Handle" || sel.Sel.Name == "Handler" || sel.Sel.Name == "HandlerFunc" {
				// r.Handle(http.MethodGet, "/api/…", h)
				if len(args) < 3 {
					return true
				}
				if m, ok := args[0].(*ast.SelectorExpr); ok {
					method = strings.ToUpper(strings.TrimPrefix(m.Sel.Name, "Method"))
				} else if lit, ok := args[0].(*ast.BasicLit); ok {
					method, _ = strconv.Unquote(lit.Value)
				}
				args = args[1:]
			}
			lit, ok := args[0].(*ast.BasicLit)
			if method == "" || !ok || lit.Kind != token.STRING {
				return true
			}
			path, _ := strconv.Unquote(lit.Value)
			if !strings.HasPrefix(path, "/api/") && path != "/api" {
				return true
			}
			scope := ""
			if h, ok := args[1].(*ast.CallExpr); ok && len(h.Args) == 2 {
				if fn, ok := h.Fun.(*ast.SelectorExpr); ok && (fn.Sel.Name == "api" || fn.Sel.Name == "apiStream") {
					// A scope, or scopes joined by " " (either opens the route).
					var names []string
					ast.Inspect(h.Args[0], func(n ast.Node) bool {
						if sc, ok := n.(*ast.SelectorExpr); ok {
							one := scopeConstants[sc.Sel.Name]
							if one == "" {
								t.Errorf("%s: route %s %s takes scope %s, which this test does not know", fset.Position(lit.Pos()), method, path, sc.Sel.Name)
							}
							names = append(names, one)
							return false
						}
						return true
					})
					scope = strings.Join(names, " ")
				}
			}
			found[routeKey(method, path)] = scope
			return true
		})
	}
	return found
}

// openAPIDoc is what the test reads of the document.
type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		SecuritySchemes map[string]json.RawMessage `json:"securitySchemes"`
		Schemas         map[string]json.RawMessage `json:"schemas"`
	} `json:"components"`
}

type operation struct {
	Security  *[]map[string][]string     `json:"security"`
	Responses map[string]json.RawMessage `json:"responses"`
}

// documentServer serves the web layer without a database: enough to ask
// for the document and to see which routes the router has.
func documentServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(web.New(web.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Sessions: scs.New()}).Handler())
	t.Cleanup(srv.Close)
	return srv
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	srv := documentServer(t)
	res, err := http.Get(srv.URL + "/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/openapi.json = %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	onDisk, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != string(onDisk) {
		t.Error("the served document differs from web/openapi.json")
	}
	var doc openAPIDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	if !regexp.MustCompile(`^3\.1\.\d+$`).MatchString(doc.OpenAPI) {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	if _, ok := doc.Components.SecuritySchemes["bearerAuth"]; !ok {
		t.Error("no bearerAuth security scheme")
	}
	if _, ok := doc.Components.Schemas["Error"]; !ok {
		t.Error("no Error schema")
	}

	table := map[string]string{}
	for _, r := range apiRoutes {
		table[routeKey(r.method, r.path)] = r.scope
	}

	// The document, both ways.
	documented := map[string]string{}
	for path, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" || method == "summary" || method == "description" {
				continue
			}
			var op operation
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			key := strings.ToUpper(method) + " " + path
			documented[key] = ""
			if op.Security != nil {
				// A route either of several scopes opens lists a bearerAuth
				// requirement for each.
				var either []string
				for _, req := range *op.Security {
					if scopes, ok := req["bearerAuth"]; ok && len(scopes) == 1 {
						either = append(either, scopes[0])
					}
				}
				documented[key] = strings.Join(either, " ")
			}
			if documented[key] != "" {
				for _, code := range []string{"401", "403"} {
					if _, ok := op.Responses[code]; !ok {
						t.Errorf("%s documents no %s", key, code)
					}
				}
			}
		}
	}
	sameRoutes(t, "the route table", table, "the OpenAPI document", documented)

	// The router's source, both ways.
	sameRoutes(t, "the route table", table, "the router (web/*.go)", sourceRoutes(t))

	// The router itself: each route is there, and answers no other method.
	for _, r := range apiRoutes {
		path := strings.ReplaceAll(strings.ReplaceAll(r.path, ":id", "1"), ":identifier", "x")
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			req, _ := http.NewRequest(m, srv.URL+path, nil)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			routed := res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusMethodNotAllowed
			if _, want := table[routeKey(m, r.path)]; routed != want {
				t.Errorf("%s %s answers %d; the route table says it is routed: %v", m, path, res.StatusCode, want)
			}
		}
	}

	// Every reference resolves.
	var all any
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	checkRefs(t, all, all)
}

// sameRoutes fails the test for every route one side has and the other
// lacks, or has with another scope.
func sameRoutes(t *testing.T, aName string, a map[string]string, bName string, b map[string]string) {
	t.Helper()
	var keys []string
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		sa, inA := a[k]
		sb, inB := b[k]
		switch {
		case !inB:
			t.Errorf("%s is in %s but not in %s", k, aName, bName)
		case !inA:
			t.Errorf("%s is in %s but not in %s", k, bName, aName)
		case sa != sb:
			t.Errorf("%s needs scope %q in %s but %q in %s", k, sa, aName, sb, bName)
		}
	}
}

// checkRefs fails the test for a "$ref" that names nothing in the document.
func checkRefs(t *testing.T, root, node any) {
	t.Helper()
	switch n := node.(type) {
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok {
			target := root
			for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
				m, _ := target.(map[string]any)
				target = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
			}
			if !strings.HasPrefix(ref, "#/") || target == nil {
				t.Errorf("$ref %q resolves to nothing", ref)
			}
		}
		for _, v := range n {
			checkRefs(t, root, v)
		}
	case []any:
		for _, v := range slices.Clone(n) {
			checkRefs(t, root, v)
		}
	}
}
