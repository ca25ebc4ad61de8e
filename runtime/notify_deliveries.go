package runtime

import (
	"errors"
	"fmt"
	"net/url"
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
