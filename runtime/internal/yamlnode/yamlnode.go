// Package yamlnode holds what the YAML file parsers of the runtime share:
// errors that name the file and the line, and the walking of yaml.v3 nodes.
package yamlnode

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// File is the name of the file being parsed.
type File string

// Errorf is an error about node n, as "file:line: message".
func (f File) Errorf(n *yaml.Node, format string, args ...any) error {
	line := 1
	if n != nil && n.Line > 0 {
		line = n.Line
	}
	return fmt.Errorf("%s:%d: %s", f, line, fmt.Sprintf(format, args...))
}

// Resolve follows aliases and steps into a document.
func Resolve(n *yaml.Node) *yaml.Node {
	for n != nil {
		switch {
		case n.Kind == yaml.AliasNode:
			n = n.Alias
		case n.Kind == yaml.DocumentNode && len(n.Content) == 1:
			n = n.Content[0]
		default:
			return n
		}
	}
	return nil
}

// IsNull reports whether n is absent, empty or null.
func IsNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null") ||
		(n.Kind == yaml.DocumentNode && len(n.Content) == 0)
}

var yamlLine = regexp.MustCompile(`^line ([0-9]+): (.*)$`)

// maxSearchLines bounds the search for the line of a syntax error, which
// parses every prefix of the file.
const maxSearchLines = 2000

// SyntaxError rewrites an error of the YAML parser about data as
// "file:line: message". The parser's own line is
// unreliable (zero-based for some errors, the start of the enclosing block
// for others, absent on the first line), so the line is that of the shortest
// prefix of data that fails with the same message, else the parser's.
func SyntaxError(filename string, data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if l := failingLine(data, msg); l > 0 {
		line = l
	}
	return fmt.Errorf("%s:%d: %s", filename, line, msg)
}

func failingLine(data []byte, msg string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) > maxSearchLines {
		return 0
	}
	end := 0
	for i, l := range lines {
		end += len(l)
		var n yaml.Node
		err := yaml.Unmarshal(data[:end], &n)
		if err == nil {
			continue
		}
		got := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := yamlLine.FindStringSubmatch(got); m != nil {
			got = m[2]
		}
		if got == msg {
			return i + 1
		}
	}
	return 0
}
