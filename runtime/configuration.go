package runtime

import (
	"encoding/json"
	"fmt"
)

// MaxIterationsCeiling is the most provider rounds any run may take.
const MaxIterationsCeiling = 20

// DefaultMaxIterations applies when a configuration names none.
const DefaultMaxIterations = 5

// PrivacyLevel decides how much of a run's content its stored events keep.
type PrivacyLevel string

// The privacy levels; metadata is the default.
const (
	PrivacyMetadata PrivacyLevel = "metadata"
	PrivacyRedacted PrivacyLevel = "redacted"
	PrivacyFull     PrivacyLevel = "full"
)

// Configuration is an agent: its provider, prompt, tools and rules.
type Configuration struct {
	ID         int64  `json:"-" yaml:"-"`
	Identifier string `json:"identifier" yaml:"identifier"`
	Name       string `json:"name" yaml:"name"`
	// Description tells people what the agent is for (GET /api/agents).
	Description  string       `json:"description,omitempty" yaml:"description"`
	Active       bool         `json:"active" yaml:"active"`
	Provider     ProviderSpec `json:"provider" yaml:"provider"`
	SystemPrompt string       `json:"system_prompt,omitempty" yaml:"system_prompt"`
	// Title is how a run gets its title: "cut" (the default) from its
	// first prompt, or "generate": the provider is asked once.
	Title                 string                `json:"title,omitempty" yaml:"title"`
	Tools                 []string              `json:"tools" yaml:"tools"`
	MaxIterations         int                   `json:"max_iterations" yaml:"max_iterations"`
	RequireSecondApprover bool                  `json:"require_second_approver" yaml:"require_second_approver"`
	PrivacyLevel          PrivacyLevel          `json:"privacy_level" yaml:"privacy_level"`
	ToolPolicies          map[string]ToolPolicy `json:"tool_policies,omitempty" yaml:"tool_policies"`
	// ApprovalsRequired is how many distinct people must approve a turn
	// (votes, see votes.go); 0 and 1 both mean one. A tool's policy may
	// ask more for the turns that call it.
	ApprovalsRequired int `json:"approvals_required,omitempty" yaml:"approvals_required"`
	// MCPServers are external MCP servers whose tools the agent may call.
	MCPServers []MCPServer `json:"mcp_servers,omitempty" yaml:"mcp_servers"`
	// IdentityTTL is how long a run credential of a forwarding MCP server
	// lives without a slide (a Go duration, at least 1m; 2h when empty).
	IdentityTTL string `json:"identity_ttl,omitempty" yaml:"identity_ttl"`
	// Notify are the webhook endpoints told when a run of this
	// configuration waits, settles, expires or escalates.
	Notify []Notify `json:"notify,omitempty" yaml:"notify"`
	// Deadline bounds every pause; a tool's policy may set its own.
	Deadline `yaml:",inline"`
	// Policy are the rules matched against every call that waits for a
	// person, in order (see Rule); rules holds them compiled.
	Policy []Rule          `json:"policy,omitempty" yaml:"-"`
	rules  *compiledPolicy `json:"-" yaml:"-"`
}

// Notify is one webhook endpoint: what it is told, how, and with which
// secret (the name of an environment variable, never the secret itself).
type Notify struct {
	URL       string `json:"url" yaml:"url"`
	SecretEnv string `json:"secret_env,omitempty" yaml:"secret_env"`
	// Events are among NotifyEvents; empty means all of them.
	Events []string `json:"events,omitempty" yaml:"events"`
	// Format is NotifyStandard (default) or NotifySlack.
	Format string `json:"format,omitempty" yaml:"format"`
}

// Notification events and formats.
const (
	EventRunWaiting   = "run.waiting"
	EventRunSettled   = "run.settled"
	EventRunExpired   = "run.expired"
	EventRunEscalated = "run.escalated"
	// EventRunVoted: someone approved a turn that needs more approvals
	// than theirs (see votes.go); the N-th approval is no vote but the
	// decision, which run.settled or the next run.waiting follow.
	EventRunVoted  = "run.voted"
	NotifyStandard = "standard"
	NotifySlack    = "slack"
)

// NotifyEvents are the events a notify entry may name.
var NotifyEvents = []string{EventRunWaiting, EventRunSettled, EventRunExpired, EventRunEscalated, EventRunVoted}

// MCPServer is an MCP server reached over streamable HTTP.
type MCPServer struct {
	// Name identifies the server in the configuration and in logs.
	Name string `json:"name" yaml:"name"`
	URL  string `json:"url" yaml:"url"`
	// Headers are sent with every request; ${NAME} in a value is replaced
	// by the environment variable NAME when the server is reached.
	Headers map[string]string `json:"headers,omitempty" yaml:"headers"`
	// RequiresApproval is the default of every tool of this server (true
	// when unset); ToolPolicies override it per tool.
	RequiresApproval *bool `json:"requires_approval,omitempty" yaml:"requires_approval"`
	// MetaTool hides the server's tools behind three: discover,
	// describe_tool and execute, for servers with many tools.
	MetaTool bool `json:"meta_tool,omitempty" yaml:"meta_tool"`
	// Identity is IdentityNone (the default) or IdentityForward: the
	// server is sent a credential of the run and its owner, which it may
	// introspect to act as that person.
	Identity string `json:"identity,omitempty" yaml:"identity"`
}

// ProviderSpec names a provider and what it needs. Script holds a scripted
// provider's rounds as JSON.
type ProviderSpec struct {
	Type      string          `json:"type" yaml:"type"`
	Model     string          `json:"model,omitempty" yaml:"model"`
	BaseURL   string          `json:"base_url,omitempty" yaml:"base_url"`
	APIKeyEnv string          `json:"api_key_env,omitempty" yaml:"api_key_env"`
	Script    json.RawMessage `json:"script,omitempty" yaml:"-"`
}

// ToolPolicy overrides a tool's defaults in one configuration.
type ToolPolicy struct {
	// RequiresApproval overrides the default (writes need approval).
	RequiresApproval *bool `json:"requires_approval,omitempty" yaml:"requires_approval"`
	// Grant is what a person must hold, beyond the right to decide, to
	// approve this tool.
	Grant string `json:"grant,omitempty" yaml:"grant"`
	// ApprovalsRequired, when above the configuration's, is how many
	// distinct people must approve a turn that calls this tool.
	ApprovalsRequired int `json:"approvals_required,omitempty" yaml:"approvals_required"`
	// Deadline, when it names a decision_timeout, replaces the
	// configuration's for turns that call this tool; see TurnDeadline.
	Deadline `yaml:",inline"`
}

// Normalize fills defaults and checks the rules every configuration obeys,
// CheckEnvName's among them: whichever way a configuration is stored, it
// never reads Turnstile's own environment variables.
func (c *Configuration) Normalize() error {
	if c.Identifier == "" {
		return fmt.Errorf("configuration: identifier is required")
	}
	if c.Name == "" {
		c.Name = c.Identifier
	}
	if c.MaxIterations == 0 {
		c.MaxIterations = DefaultMaxIterations
	}
	if c.MaxIterations < 1 || c.MaxIterations > MaxIterationsCeiling {
		return fmt.Errorf("configuration %s: max_iterations must be between 1 and %d, not %d", c.Identifier, MaxIterationsCeiling, c.MaxIterations)
	}
	switch c.Title {
	case "", TitleCut, TitleGenerate:
	default:
		return fmt.Errorf("configuration %s: title must be cut or generate, not %q", c.Identifier, c.Title)
	}
	switch c.PrivacyLevel {
	case "":
		c.PrivacyLevel = PrivacyMetadata
	case PrivacyMetadata, PrivacyRedacted, PrivacyFull:
	default:
		return fmt.Errorf("configuration %s: privacy_level must be metadata, redacted or full, not %q", c.Identifier, c.PrivacyLevel)
	}
	if err := c.Deadline.Check(); err != nil {
		return fmt.Errorf("configuration %s: %w", c.Identifier, err)
	}
	if err := checkApprovals(c.ApprovalsRequired); err != nil {
		return fmt.Errorf("configuration %s: %w", c.Identifier, err)
	}
	for name, p := range c.ToolPolicies {
		if err := p.Deadline.Check(); err != nil {
			return fmt.Errorf("configuration %s: tool_policies %s: %w", c.Identifier, name, err)
		}
		if err := checkApprovals(p.ApprovalsRequired); err != nil {
			return fmt.Errorf("configuration %s: tool_policies %s: %w", c.Identifier, name, err)
		}
	}
	if err := c.CheckIdentityTTL(); err != nil {
		return fmt.Errorf("configuration %s: %w", c.Identifier, err)
	}
	for _, srv := range c.MCPServers {
		if err := srv.CheckIdentity(); err != nil {
			return fmt.Errorf("configuration %s: %w", c.Identifier, err)
		}
	}
	if err := c.checkEnv(); err != nil {
		return fmt.Errorf("configuration %s: %w", c.Identifier, err)
	}
	return c.checkNotify()
}

// NeedsApproval reports whether a call of the tool waits for a person.
func (c *Configuration) NeedsApproval(spec ToolSpec) bool {
	if p, ok := c.ToolPolicies[spec.Name]; ok && p.RequiresApproval != nil {
		return *p.RequiresApproval
	}
	if spec.RequiresApproval != nil {
		return *spec.RequiresApproval
	}
	return spec.Effect != ReadOnly
}

// Grant returns the grant a person needs to approve the tool, or "".
func (c *Configuration) Grant(tool string) string { return c.ToolPolicies[tool].Grant }
