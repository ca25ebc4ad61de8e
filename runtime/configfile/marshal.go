package configfile

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
)

// file is a configuration as written by Marshal, in the order people read
// it.
type file struct {
	Identifier            string                `yaml:"identifier"`
	Name                  string                `yaml:"name"`
	Description           string                `yaml:"description,omitempty"`
	Active                bool                  `yaml:"active"`
	Provider              provider              `yaml:"provider"`
	SystemPrompt          string                `yaml:"system_prompt,omitempty"`
	Title                 string                `yaml:"title,omitempty"`
	Tools                 []string              `yaml:"tools"`
	MaxIterations         int                   `yaml:"max_iterations,omitempty"`
	RequireSecondApprover bool                  `yaml:"require_second_approver"`
	ApprovalsRequired     int                   `yaml:"approvals_required,omitempty"`
	PrivacyLevel          runtime.PrivacyLevel  `yaml:"privacy_level,omitempty"`
	ToolPolicies          map[string]toolPolicy `yaml:"tool_policies,omitempty"`
	MCPServers            []mcpServer           `yaml:"mcp_servers,omitempty"`
	IdentityTTL           string                `yaml:"identity_ttl,omitempty"`
	Notify                []notify              `yaml:"notify,omitempty"`
	deadline              `yaml:",inline"`
	Policy                []rule `yaml:"policy,omitempty"`
}

// rule is runtime.Rule as written: then is a word, or {votes: N}.
type rule struct {
	Name   string `yaml:"name"`
	When   string `yaml:"when"`
	Then   any    `yaml:"then"`
	Reason string `yaml:"reason,omitempty"`
}

// notify is runtime.Notify as written: each key but the url only when
// given.
type notify struct {
	URL       string   `yaml:"url"`
	SecretEnv string   `yaml:"secret_env,omitempty"`
	Events    []string `yaml:"events,omitempty,flow"`
	Format    string   `yaml:"format,omitempty"`
}

// deadline is runtime.Deadline as written: each key only when given.
type deadline struct {
	DecisionTimeout string `yaml:"decision_timeout,omitempty"`
	OnTimeout       string `yaml:"on_timeout,omitempty"`
	EscalateGrant   string `yaml:"escalate_grant,omitempty"`
}

type mcpServer struct {
	Name             string            `yaml:"name"`
	URL              string            `yaml:"url"`
	Headers          map[string]string `yaml:"headers,omitempty"`
	RequiresApproval *bool             `yaml:"requires_approval,omitempty"`
	MetaTool         bool              `yaml:"meta_tool,omitempty"`
	Identity         string            `yaml:"identity,omitempty"`
}

type provider struct {
	Type      string           `yaml:"type"`
	Model     string           `yaml:"model,omitempty"`
	BaseURL   string           `yaml:"base_url,omitempty"`
	APIKeyEnv string           `yaml:"api_key_env,omitempty"`
	Script    *scripted.Script `yaml:"script,omitempty"`
}

type toolPolicy struct {
	RequiresApproval *bool  `yaml:"requires_approval,omitempty"`
	Grant            string `yaml:"grant,omitempty"`
	Approvals        int    `yaml:"approvals_required,omitempty"`
	deadline         `yaml:",inline"`
}

// Marshal writes cfg as a configuration file that Parse reads back to an
// equal configuration. It fails when the stored script does not read.
func Marshal(cfg *runtime.Configuration) ([]byte, error) {
	f := file{
		Identifier:            cfg.Identifier,
		Name:                  cfg.Name,
		Description:           cfg.Description,
		Active:                cfg.Active,
		SystemPrompt:          cfg.SystemPrompt,
		Title:                 cfg.Title,
		Tools:                 cfg.Tools,
		MaxIterations:         cfg.MaxIterations,
		RequireSecondApprover: cfg.RequireSecondApprover,
		ApprovalsRequired:     cfg.ApprovalsRequired,
		PrivacyLevel:          cfg.PrivacyLevel,
		IdentityTTL:           cfg.IdentityTTL,
		deadline:              deadline(cfg.Deadline),
		Provider: provider{
			Type:      cfg.Provider.Type,
			Model:     cfg.Provider.Model,
			BaseURL:   cfg.Provider.BaseURL,
			APIKeyEnv: cfg.Provider.APIKeyEnv,
		},
	}
	if f.Tools == nil {
		f.Tools = []string{}
	}
	if len(cfg.Provider.Script) > 0 {
		s, err := scripted.FromJSON(cfg.Provider.Script)
		if err != nil {
			return nil, fmt.Errorf("config: marshal %s: %w", cfg.Identifier, err)
		}
		f.Provider.Script = s
	}
	if len(cfg.ToolPolicies) > 0 {
		f.ToolPolicies = make(map[string]toolPolicy, len(cfg.ToolPolicies))
		for name, pol := range cfg.ToolPolicies {
			f.ToolPolicies[name] = toolPolicy{RequiresApproval: pol.RequiresApproval, Grant: pol.Grant,
				Approvals: pol.ApprovalsRequired, deadline: deadline(pol.Deadline)}
		}
	}
	for _, srv := range cfg.MCPServers {
		f.MCPServers = append(f.MCPServers, mcpServer(srv))
	}
	for _, n := range cfg.Notify {
		f.Notify = append(f.Notify, notify(n))
	}
	for _, r := range cfg.Policy {
		var then any = r.Then
		if r.Then == runtime.RuleVotes {
			then = map[string]int{runtime.RuleVotes: r.Votes}
		}
		f.Policy = append(f.Policy, rule{Name: r.Name, When: r.When, Then: then, Reason: r.Reason})
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("config: marshal %s: %w", cfg.Identifier, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: marshal %s: %w", cfg.Identifier, err)
	}
	return buf.Bytes(), nil
}
