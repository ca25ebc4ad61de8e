package main

import (
	"bytes"
	"context"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// TestConfigApplyRefusesTheServersVariables: with api_key_env:
// TURNSTILE_STATE_KEYS and someone's base_url, the first run would send
// the state keys as a bearer token. config apply refuses the file at the
// line, and writes nothing.
func TestConfigApplyRefusesTheServersVariables(t *testing.T) {
	db, dsn := dbtest.New(t)
	path := writeFile(t, "leak.yaml", `identifier: leak
provider:
  type: openai
  model: gpt-4o-mini
  api_key_env: TURNSTILE_STATE_KEYS
  base_url: https://llm.attacker.example/v1
`)
	_, _, err := turnstile(t, dsn, "config", "apply", path)
	want := path + ":5: provider api_key_env: TURNSTILE_STATE_KEYS is reserved: a configuration may not read Turnstile's own environment variables (TURNSTILE_*, HTTP_PROXY, HTTPS_PROXY, NO_PROXY)"
	if err == nil || err.Error() != want {
		t.Errorf("config apply = %v\nwant %s", err, want)
	}
	if rows := storedConfigs(t, db); len(rows) != 0 {
		t.Errorf("a refused file was stored: %q", rows)
	}
}

// TestEveryVariableTheServerReadsIsReserved: no configuration can name a
// variable the binary reads itself. Two sources of names, each derived
// from the code so that a new flag or a new os.Getenv cannot be
// forgotten: every name a command's flag parsing asks its environment
// for (each flag's), and every constant name passed to a Getenv or
// LookupEnv call anywhere in the binary's own packages.
func TestEveryVariableTheServerReadsIsReserved(t *testing.T) {
	var mu sync.Mutex
	asked := map[string]bool{}
	getenv := func(k string) string {
		mu.Lock()
		defer mu.Unlock()
		asked[k] = true
		return ""
	}
	for _, cmd := range [][]string{{"serve"}, {"work"}, {"migrate"}, {"user", "add"}, {"user", "list"}, {"user", "delete"},
		{"token", "create"}, {"token", "revoke"}, {"token", "list"}, {"config", "apply"}, {"config", "list"},
		{"config", "export"}, {"webhooks", "list"}, {"webhooks", "retry"}, {"demo", "reset"}} {
		var out bytes.Buffer
		run(context.Background(), append(slices.Clone(cmd), "--help"), getenv, strings.NewReader(""), &out, &out)
	}
	for _, want := range []string{"TURNSTILE_DSN", "TURNSTILE_PUBLIC_URL", "TURNSTILE_WEBHOOK_ALLOW_PRIVATE"} {
		if !asked[want] {
			t.Errorf("the commands' flags never read %s: the recording misses flags", want)
		}
	}

	read := getenvConstants(t)
	if !slices.Contains(read, "TURNSTILE_STATE_KEYS") {
		t.Errorf("the source scan found %q, not TURNSTILE_STATE_KEYS: it misses calls", read)
	}
	for name := range asked {
		read = append(read, name)
	}
	for _, name := range read {
		if !runtime.ReservedEnv(name) {
			t.Errorf("the server reads %s, which a configuration may still name: make it TURNSTILE_* or list it in runtime's reserved variables", name)
		}
	}
}

// getenvConstants are the names, literal or constant, passed to a call
// of a function named Getenv, LookupEnv or getenv in the non-test files
// of the module's packages that the binary imports. A name held in a
// variable (a configuration's api_key_env) is the configuration's, which
// the rule checks where it is read.
func getenvConstants(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}|{{.Dir}}|{{join .GoFiles \",\"}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var names []string
	for line := range strings.Lines(string(out)) {
		parts := strings.Split(strings.TrimSpace(line), "|")
		if len(parts) != 3 || !strings.HasPrefix(parts[0], "github.com/turnstile-dev/turnstile") {
			continue
		}
		fset := gotoken.NewFileSet()
		var files []*ast.File
		consts := map[string]string{}
		for name := range strings.SplitSeq(parts[2], ",") {
			f, err := parser.ParseFile(fset, filepath.Join(parts[1], name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
			for _, d := range f.Decls {
				if g, ok := d.(*ast.GenDecl); ok && g.Tok == gotoken.CONST {
					for _, s := range g.Specs {
						vs := s.(*ast.ValueSpec)
						for i, id := range vs.Names {
							if i < len(vs.Values) {
								if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == gotoken.STRING {
									consts[id.Name], _ = strconv.Unquote(lit.Value)
								}
							}
						}
					}
				}
			}
		}
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				var fn string
				switch f := call.Fun.(type) {
				case *ast.Ident:
					fn = f.Name
				case *ast.SelectorExpr:
					fn = f.Sel.Name
				}
				if fn != "Getenv" && fn != "LookupEnv" && fn != "getenv" {
					return true
				}
				switch a := call.Args[0].(type) {
				case *ast.BasicLit:
					if s, err := strconv.Unquote(a.Value); err == nil {
						names = append(names, s)
					}
				case *ast.Ident:
					if s, ok := consts[a.Name]; ok {
						names = append(names, s)
					}
				}
				return true
			})
		}
	}
	return names
}
