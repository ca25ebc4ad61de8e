package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Names. A model sees an MCP tool as "<server>__<tool>": model APIs accept
// tool names of [a-zA-Z0-9_-] up to 64 characters, and a server name has no
// underscore, so the first "__" always ends it. A tool name that already
// fits is kept as it is; any other (a dot, a long name) has its other
// characters replaced by "_", is shortened to fit, and gets "_" and eight
// hex digits of the SHA-256 of its original name, which keeps it stable
// from one run to the next and apart from the tool whose name it now
// resembles.
const (
	// Separator joins a server's name and its tool's.
	Separator = "__"
	// MaxToolName is the longest tool name model APIs accept.
	MaxToolName = 64
	// MaxServerName is the longest server name, which leaves a tool at
	// least 32 characters.
	MaxServerName = MaxToolName - len(Separator) - 32
)

// The meta-tool's three tools, each after the server's name and Separator.
const (
	Discover     = "discover"
	DescribeTool = "describe_tool"
	Execute      = "execute"
)

// MetaTools are the tools a server with meta_tool set offers instead of its
// own.
var MetaTools = []string{Discover, DescribeTool, Execute}

var (
	serverNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	toolPartPattern   = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	notToolRune       = regexp.MustCompile(`[^a-zA-Z0-9_-]`)
	envRef            = regexp.MustCompile(`\$\{([^}]*)\}`)
	envName           = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// CheckServerName returns an error saying what is wrong with an MCP
// server's name, or nil.
func CheckServerName(name string) error {
	if name == "" {
		return fmt.Errorf("an mcp server needs a name")
	}
	if len(name) > MaxServerName || !serverNamePattern.MatchString(name) {
		return fmt.Errorf("mcp server name %q must be lower-case letters, digits and dashes, starting with a letter or digit, at most %d characters", name, MaxServerName)
	}
	return nil
}

// ToolName returns the name a model sees for the tool of an MCP server.
func ToolName(server, tool string) string {
	prefix := server + Separator
	if toolPartPattern.MatchString(tool) && len(prefix)+len(tool) <= MaxToolName {
		return prefix + tool
	}
	sum := sha256.Sum256([]byte(tool))
	suffix := "_" + hex.EncodeToString(sum[:4])
	part := notToolRune.ReplaceAllString(tool, "_")
	if room := MaxToolName - len(prefix) - len(suffix); len(part) > room {
		part = part[:room]
	}
	return prefix + part + suffix
}

// SplitToolName returns the server a model-facing tool name belongs to and
// the rest, or ok false when the name has no server part.
func SplitToolName(name string) (server, rest string, ok bool) {
	server, rest, ok = strings.Cut(name, Separator)
	if !ok || CheckServerName(server) != nil {
		return "", "", false
	}
	return server, rest, true
}

// CanName reports whether name can be the name a model sees for one of the
// server's tools; with meta set, only the meta-tool's three can.
func CanName(server string, meta bool, name string) bool {
	s, rest, ok := SplitToolName(name)
	if !ok || s != server || len(name) > MaxToolName {
		return false
	}
	if meta {
		for _, m := range MetaTools {
			if rest == m {
				return true
			}
		}
		return false
	}
	return toolPartPattern.MatchString(rest)
}

// CheckTemplate returns an error when s has a malformed ${NAME} reference
// or names a variable runtime.CheckEnvName refuses, or nil.
func CheckTemplate(s string) error {
	for rest := s; ; {
		i := strings.Index(rest, "${")
		if i < 0 {
			return nil
		}
		rest = rest[i+2:]
		name, after, ok := strings.Cut(rest, "}")
		if !ok {
			return fmt.Errorf("${ without a closing }")
		}
		if !envName.MatchString(name) {
			return fmt.Errorf("${%s} does not name an environment variable", name)
		}
		// Turnstile's own settings (the database DSN, the state keys) must
		// never travel to an external server.
		if err := runtime.CheckEnvName(name); err != nil {
			return err
		}
		rest = after
	}
}

// interpolate replaces every ${NAME} of s with the variable's value. A
// variable that is unset or empty is an *unsetError naming it. It returns
// the values it used, so that errors can be kept from showing them.
func interpolate(s string, getenv func(string) string) (string, map[string]string, error) {
	if err := CheckTemplate(s); err != nil {
		return "", nil, err
	}
	used := map[string]string{}
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v := getenv(name)
		if v == "" && !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		used[name] = v
		return v
	})
	if len(missing) > 0 {
		return "", nil, &unsetError{names: missing}
	}
	return out, used, nil
}

// Variables returns the names of the environment variables that s refers
// to as ${NAME}, each once, in order; a malformed reference is skipped
// (CheckTemplate reports it).
func Variables(s string) []string {
	var names []string
	for _, m := range envRef.FindAllStringSubmatch(s, -1) {
		if envName.MatchString(m[1]) && !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

// unsetError names the environment variables a server entry needs that
// are unset. Its message is read by people and by the model, so it says
// which variables and never a value.
type unsetError struct {
	names []string
}

func (e *unsetError) Error() string {
	if len(e.names) == 1 {
		return "environment variable " + e.names[0] + " is unset"
	}
	return "environment variables " + strings.Join(e.names[:len(e.names)-1], ", ") +
		" and " + e.names[len(e.names)-1] + " are unset"
}

// reservedHeaders are set by the MCP transport itself.
var reservedHeaders = []string{"accept", "content-type", "content-length", "host",
	"last-event-id", "mcp-protocol-version", "mcp-session-id", "transfer-encoding"}

var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// CheckHeaderName returns an error when name cannot be a header an MCP
// server entry sets, or nil.
func CheckHeaderName(name string) error {
	if !headerName.MatchString(name) {
		return fmt.Errorf("%q is not a valid header name", name)
	}
	for _, r := range reservedHeaders {
		if strings.EqualFold(name, r) {
			return fmt.Errorf("header %s is set by the MCP transport and cannot be configured", name)
		}
	}
	return nil
}
