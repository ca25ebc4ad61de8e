package runtime

import (
	"fmt"
	"strings"
)

// Agent is a stored configuration with its version: 1 when it was
// created, one more each time a different definition was stored.
type Agent struct {
	Configuration *Configuration
	Version       int
}

// AppliedAgent is what storing a configuration file did: Outcome is
// "created", "updated" or "unchanged", and Warnings are what config apply
// writes on standard error (an unset environment variable, an MCP server
// that does not answer now), which refuse nothing.
type AppliedAgent struct {
	Agent    Agent
	Outcome  string
	Warnings []LineMessage
}

// LineMessage is one message about one line of a configuration file;
// Line is 0 when it is about the whole file.
type LineMessage struct {
	Line    int    `json:"line"`
	Message string `json:"message"`
}

// ConfigurationError is a configuration file that cannot be stored, with
// every error of it in line order; nothing was written.
type ConfigurationError struct {
	Lines []LineMessage
}

func (e *ConfigurationError) Error() string {
	msgs := make([]string, len(e.Lines))
	for i, l := range e.Lines {
		msgs[i] = fmt.Sprintf("line %d: %s", l.Line, l.Message)
	}
	return "invalid configuration: " + strings.Join(msgs, "; ")
}
