package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/web"
)

// agentFiles is web.Agents for serve: configuration files stored over
// HTTP with the checks, the comparison and the warnings of config apply,
// in the environment of this process (as config apply's warnings are in
// the shell's).
type agentFiles struct{ a *app }

var _ web.Agents = agentFiles{}

// agentFileName names the body in config apply's messages, whose
// "file:line: " prefix the API replaces by a line number.
const agentFileName = "body"

func (f agentFiles) ActiveAgents(ctx context.Context) ([]runtime.Agent, error) {
	return f.a.store.ActiveAgents(ctx)
}

func (f agentFiles) Agent(ctx context.Context, identifier string) (runtime.Agent, error) {
	return f.a.store.Agent(ctx, identifier)
}

func (f agentFiles) DeactivateAgent(ctx context.Context, identifier string) error {
	return f.a.store.DeactivateAgent(ctx, identifier)
}

// ExportAgent is exportConfig's output.
func (f agentFiles) ExportAgent(ctx context.Context, identifier string) ([]byte, error) {
	cfg, err := f.a.store.ConfigurationByIdentifier(ctx, identifier)
	if err != nil {
		return nil, err
	}
	return configfile.Marshal(cfg)
}

// ApplyAgent is applyConfig for a body: configfile.Parse's errors, and
// the file's identifier when it is not the path's, all at once; else the
// configuration stored unless its definition is the same, and the
// warnings of config apply.
func (f agentFiles) ApplyAgent(ctx context.Context, identifier string, data []byte) (runtime.AppliedAgent, error) {
	cfg, err := configfile.Parse(agentFileName, data, f.a.knownTool)
	lines := lineMessages(err)
	if mismatch, ok := identifierMismatch(data, identifier); ok {
		lines = append(lines, mismatch)
		sort.SliceStable(lines, func(i, j int) bool { return lines[i].Line < lines[j].Line })
	}
	if len(lines) > 0 {
		return runtime.AppliedAgent{}, &runtime.ConfigurationError{Lines: lines}
	}
	outcome := "created"
	old, err := f.a.store.ConfigurationByIdentifier(ctx, cfg.Identifier)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
	case err != nil:
		return runtime.AppliedAgent{}, err
	default:
		same, err := sameDefinition(old, cfg)
		if err != nil {
			return runtime.AppliedAgent{}, err
		}
		outcome = "updated"
		if same && old.Active == cfg.Active {
			outcome = "unchanged"
		}
	}
	if outcome != "unchanged" {
		if err := f.a.store.SaveConfiguration(ctx, cfg); err != nil {
			return runtime.AppliedAgent{}, err
		}
	}
	agent, err := f.a.store.Agent(ctx, cfg.Identifier)
	if err != nil {
		return runtime.AppliedAgent{}, err
	}
	var warned bytes.Buffer
	warnMCP(ctx, agentFileName, data, cfg, f.getenv, &warned)
	for _, w := range configfile.NotifyWarnings(agentFileName, data, cfg, f.getenv) {
		fmt.Fprintln(&warned, w)
	}
	var warnings []runtime.LineMessage
	for sc := bufio.NewScanner(&warned); sc.Scan(); {
		w := lineMessage(sc.Text())
		w.Message = strings.TrimPrefix(w.Message, "warning: ")
		warnings = append(warnings, w)
	}
	return runtime.AppliedAgent{Agent: agent, Outcome: outcome, Warnings: warnings}, nil
}

func (f agentFiles) getenv(name string) string {
	if f.a.getenv == nil {
		return ""
	}
	return f.a.getenv(name)
}

// identifierMismatch is an error about the file's identifier when it is
// a string other than the path's. A missing or malformed one is
// configfile.Parse's to report.
func identifierMismatch(data []byte, identifier string) (runtime.LineMessage, bool) {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		return runtime.LineMessage{}, false
	}
	n := mappingValue(resolveYAML(&doc), "identifier")
	if n == nil || n.Kind != yaml.ScalarNode || n.Value == "" || n.Value == identifier {
		return runtime.LineMessage{}, false
	}
	return runtime.LineMessage{Line: n.Line, Message: fmt.Sprintf(
		"identifier %q is not %q, the identifier of the address: PUT the file to /api/agents/%s, or change its identifier", n.Value, identifier, n.Value)}, true
}

// lineMessages splits configfile.Parse's error, one "file:line: message"
// per error, into lines and messages.
func lineMessages(err error) []runtime.LineMessage {
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	out := make([]runtime.LineMessage, 0, len(errs))
	for _, e := range errs {
		out = append(out, lineMessage(e.Error()))
	}
	return out
}

// lineMessage reads "body:line: message" (or "body: message"), as config
// apply's errors and warnings are written.
func lineMessage(s string) runtime.LineMessage {
	rest, ok := strings.CutPrefix(s, agentFileName+":")
	if !ok {
		return runtime.LineMessage{Message: s}
	}
	if digits, msg, ok := strings.Cut(rest, ": "); ok {
		if n, err := strconv.Atoi(digits); err == nil {
			return runtime.LineMessage{Line: n, Message: msg}
		}
	}
	return runtime.LineMessage{Message: strings.TrimSpace(rest)}
}
