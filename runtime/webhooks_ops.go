package runtime

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DeliveryInfo is one outbox row as operators see it: where it goes, how
// far it got. It carries neither the body (run content at privacy level
// full) nor anything of the secret.
type DeliveryInfo struct {
	ID              int64  `db:"id"`
	WebhookID       string `db:"webhook_id"`
	RunID           int64  `db:"run_id"`
	ConfigurationID int64  `db:"configuration_id"`
	Event           string `db:"event"`
	URL             string `db:"url"`
	Format          string `db:"format"`
	// Status is webhook_deliveries.status: pending, delivered or failed.
	Status        string    `db:"status"`
	Attempts      int       `db:"attempts"`
	NextAttemptAt time.Time `db:"next_attempt_at"`
	// LastStatus is the HTTP status of the last attempt; 0 when none
	// answered (a timeout, a refused connection) or none was made.
	LastStatus int `db:"last_status"`
	// LastError says why the last attempt failed; "" when none did.
	LastError   string     `db:"last_error"`
	CreatedAt   time.Time  `db:"created_at"`
	DeliveredAt *time.Time `db:"delivered_at"`
}

// Target is the URL as people are shown it, on pages and in webhooks
// list: its scheme and host (with a port) only. The path, query and user
// part may be the credential (a Slack incoming webhook's URL is).
func (d DeliveryInfo) Target() string { return NotifyTarget(d.URL) }

// NotifyTarget is a notify URL's scheme and host, lower-case
// ("https://hooks.slack.com"); "(not an http or https URL)" for anything
// else, which is never repeated.
func NotifyTarget(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(not an http or https URL)"
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "(not an http or https URL)"
	}
	return scheme + "://" + strings.ToLower(u.Host)
}

// Pending reports whether the workers still try the delivery.
func (d DeliveryInfo) Pending() bool { return d.Status == "pending" }

// LastAnswer is how the last attempt ended, for people: "503", "503:
// upstream down", "timeout after 10s"; "" before the first attempt.
func (d DeliveryInfo) LastAnswer() string {
	switch {
	case d.LastStatus != 0 && d.LastError != "":
		return strconv.Itoa(d.LastStatus) + ": " + d.LastError
	case d.LastStatus != 0:
		return strconv.Itoa(d.LastStatus)
	}
	return d.LastError
}

// ErrDeliveryNotFailed: only a failed delivery may be retried by hand; a
// pending one is retried by the workers already, a delivered one arrived.
// The error that says so is a *DeliveryNotFailedError.
var ErrDeliveryNotFailed = errors.New("delivery is not failed")

// DeliveryNotFailedError is a retry of a delivery that is not failed: it
// names the delivery and its status, and is ErrDeliveryNotFailed.
type DeliveryNotFailedError struct {
	ID     int64
	Status string
}

func (e *DeliveryNotFailedError) Error() string {
	why := "the workers retry it themselves"
	if e.Status == "delivered" {
		why = "it arrived"
	}
	return fmt.Sprintf("delivery %d is %s, not failed; only a failed delivery is retried by hand (%s)", e.ID, e.Status, why)
}

// Is makes errors.Is(err, ErrDeliveryNotFailed) true.
func (e *DeliveryNotFailedError) Is(target error) bool { return target == ErrDeliveryNotFailed }

// envNamePattern is what an environment variable's name may be. A value
// outside it in secret_env is most likely the secret itself, pasted where
// its name belongs: refused, so it is never stored or shown.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

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
