package runtime

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Check reports the first rule the entry breaks, as "<key> …" (the key
// first, so a file reader can point at its line): a url that is missing
// or not http(s) with a host, a secret_env that names no environment
// variable, an event outside NotifyEvents or given twice, a format other
// than standard or slack. It changes nothing.
func (n Notify) Check() error {
	if err := CheckNotifyURL(n.URL); err != nil {
		return err
	}
	if err := CheckSecretEnv(n.SecretEnv); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, e := range n.Events {
		if err := CheckNotifyEvent(e); err != nil {
			return err
		}
		if seen[e] {
			return fmt.Errorf("events names %s twice", e)
		}
		seen[e] = true
	}
	return CheckNotifyFormat(n.Format)
}

// CheckNotifyURL refuses a url that is empty, unparsable, of a scheme
// other than http or https, or without a host.
func CheckNotifyURL(s string) error {
	if s == "" {
		return errors.New("url is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("url %q does not parse", s)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("url must be http or https, not %q", s)
	}
	if u.Host == "" {
		return fmt.Errorf("url %q has no host", s)
	}
	return nil
}

// CheckSecretEnv refuses a secret_env that is no environment variable's
// name ("" is none), and one that CheckEnvName refuses. Its message never
// repeats a value that is no name, which may be the secret itself.
func CheckSecretEnv(name string) error {
	if name == "" {
		return nil
	}
	if !envNamePattern.MatchString(name) {
		return errors.New("secret_env must name an environment variable (letters, digits and _), not hold the secret itself")
	}
	if err := CheckEnvName(name); err != nil {
		return fmt.Errorf("secret_env: %w", err)
	}
	return nil
}

// CheckNotifyEvent refuses an event outside NotifyEvents, naming them.
func CheckNotifyEvent(e string) error {
	if !slices.Contains(NotifyEvents, e) {
		return fmt.Errorf("events: unknown event %q (allowed: %s)", e, strings.Join(NotifyEvents, ", "))
	}
	return nil
}

// CheckNotifyFormat refuses a format other than standard or slack ("" is
// standard).
func CheckNotifyFormat(f string) error {
	if f != "" && f != NotifyStandard && f != NotifySlack {
		return fmt.Errorf("format must be %s or %s, not %q", NotifyStandard, NotifySlack, f)
	}
	return nil
}

// checkNotify checks every notify entry of a configuration; an error
// names the entry by its place (from 1) and its url.
func (c *Configuration) checkNotify() error {
	for i, n := range c.Notify {
		if err := n.Check(); err != nil {
			return fmt.Errorf("configuration %s: notify %d: %w", c.Identifier, i+1, err)
		}
	}
	return nil
}

// envNamePattern is what an environment variable's name may be. A value
// outside it in secret_env is most likely the secret itself, pasted where
// its name belongs: refused, so it is never stored or shown.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
