package web_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestOpenAPIRequestBodiesMatchTheHandlers: every field a decision body
// takes is documented, and every documented field is taken — the body
// structs of api.go read from the source, the schemas from openapi.json.
func TestOpenAPIRequestBodiesMatchTheHandlers(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "api.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for body, schema := range map[string]string{"decisionBody": "DecisionRequest", "inputBody": "InputRequest"} {
		got := structTags(f, body)
		if len(got) == 0 {
			t.Fatalf("api.go has no struct %s with json tags", body)
		}
		var want []string
		for k := range doc.Components.Schemas[schema].Properties {
			want = append(want, k)
		}
		slices.Sort(want)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s takes %v, openapi.json's %s documents %v", body, got, schema, want)
		}
	}
	if !slices.Contains(structTags(f, "decisionBody"), "arguments") {
		t.Error(`POST /api/runs/{id}/decisions takes no "arguments": edit, then approve is missing`)
	}
}

// structTags are the json names of a struct type's fields, sorted.
func structTags(f *ast.File, name string) []string {
	var tags []string
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != name {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, field := range st.Fields.List {
			if field.Tag == nil {
				continue
			}
			tag, _ := strconv.Unquote(field.Tag.Value)
			jsonName, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if jsonName != "" && jsonName != "-" {
				tags = append(tags, jsonName)
			}
		}
		return false
	})
	slices.Sort(tags)
	return tags
}
