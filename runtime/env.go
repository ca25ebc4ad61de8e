package runtime

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// EnvPrefix starts the name of every environment variable Turnstile reads
// as its own setting: each flag's (--dsn is TURNSTILE_DSN; cmd/turnstile
// derives them from this) and TURNSTILE_STATE_KEYS. They hold the
// database's password and the keys of the state at rest.
const EnvPrefix = "TURNSTILE_"

// processEnv are the other variables the server reads itself: the proxy
// settings that net/http reads for every outgoing request (a proxy's URL
// may hold its password). The Go runtime's own (GODEBUG, GOMAXPROCS, …)
// hold no secret and are not listed; cmd/turnstile's tests check that
// every name the binary reads is TURNSTILE_* or here.
var processEnv = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}

// ReservedEnv reports whether name is a variable no configuration may
// read: TURNSTILE_* or one of processEnv, in any case (Go's proxy lookup
// reads the lower-case spellings too).
func ReservedEnv(name string) bool {
	upper := strings.ToUpper(name)
	return strings.HasPrefix(upper, EnvPrefix) || slices.Contains(processEnv, upper)
}

// CheckEnvName is the one rule for every environment variable a
// configuration names (a provider's api_key_env, a webhook's secret_env,
// ${NAME} in an MCP server's URL and headers): it refuses a reserved one
// (ReservedEnv), whose value would otherwise travel to whatever endpoint
// the configuration names. The error names the variable, never a value.
func CheckEnvName(name string) error {
	if ReservedEnv(name) {
		return fmt.Errorf("%s is reserved: a configuration may not read Turnstile's own environment variables (%s*, %s)",
			name, EnvPrefix, strings.Join(processEnv, ", "))
	}
	return nil
}

// envRef is a ${NAME} of an MCP server's URL or header; a malformed one
// is refused where the server is reached (mcp.CheckTemplate), and never
// read.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// checkEnv applies CheckEnvName to every variable the configuration
// names; the error says where, as "<key> …".
func (c *Configuration) checkEnv() error {
	if c.Provider.APIKeyEnv != "" {
		if err := CheckEnvName(c.Provider.APIKeyEnv); err != nil {
			return fmt.Errorf("provider api_key_env: %w", err)
		}
	}
	for _, s := range c.MCPServers {
		for _, m := range envRef.FindAllStringSubmatch(s.URL, -1) {
			if err := CheckEnvName(m[1]); err != nil {
				return fmt.Errorf("mcp server %s: url: %w", s.Name, err)
			}
		}
		names := make([]string, 0, len(s.Headers))
		for h := range s.Headers {
			names = append(names, h)
		}
		slices.Sort(names)
		for _, h := range names {
			for _, m := range envRef.FindAllStringSubmatch(s.Headers[h], -1) {
				if err := CheckEnvName(m[1]); err != nil {
					return fmt.Errorf("mcp server %s: header %s: %w", s.Name, h, err)
				}
			}
		}
	}
	return nil
}
