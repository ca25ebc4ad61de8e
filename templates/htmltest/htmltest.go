// Package htmltest reads rendered HTML for tests: templ components
// rendered and parsed, elements found by tag and attributes, their text.
// The templates' own tests and the web layer's use it.
package htmltest

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"golang.org/x/net/html"
)

// Render renders c and parses the result, failing the test on either error.
func Render(t testing.TB, c templ.Component) (string, *html.Node) {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	doc, err := html.Parse(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return buf.String(), doc
}

// FindAll returns every element below n for which match is true.
func FindAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	for d := range n.Descendants() {
		if d.Type == html.ElementNode && match(d) {
			out = append(out, d)
		}
	}
	return out
}

// Attr returns an attribute's value, and whether the element has it.
func Attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// Is matches an element by tag and attributes; an attribute value of "*"
// only requires the attribute to be present.
func Is(tag string, attrs ...string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		if tag != "" && n.Data != tag {
			return false
		}
		for i := 0; i+1 < len(attrs); i += 2 {
			v, ok := Attr(n, attrs[i])
			if !ok || (attrs[i+1] != "*" && v != attrs[i+1]) {
				return false
			}
		}
		return true
	}
}

// One returns the single element matching; it fails unless there is
// exactly one.
func One(t testing.TB, n *html.Node, what string, match func(*html.Node) bool) *html.Node {
	t.Helper()
	got := FindAll(n, match)
	if len(got) != 1 {
		t.Fatalf("%s: got %d matches, want 1", what, len(got))
	}
	return got[0]
}

// None fails the test when any element matches.
func None(t testing.TB, n *html.Node, what string, match func(*html.Node) bool) {
	t.Helper()
	if got := FindAll(n, match); len(got) != 0 {
		t.Errorf("%s: got %d matches, want none", what, len(got))
	}
}

// Text is the text below n, its runs of white space made one space.
func Text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
			b.WriteByte(' ')
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// WantAttr fails the test unless n has the attribute key with the value
// want.
func WantAttr(t testing.TB, n *html.Node, key, want string) {
	t.Helper()
	got, ok := Attr(n, key)
	if !ok {
		t.Errorf("<%s> has no %s attribute, want %q", n.Data, key, want)
		return
	}
	if got != want {
		t.Errorf("<%s %s>: got %q, want %q", n.Data, key, got, want)
	}
}
