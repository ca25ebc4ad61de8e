package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestRunPageShowsFailedDeliveriesToAdmins: a notification the workers
// gave up on shows on the run's page for an admin, with its endpoint's
// scheme and host (never the path or query: a Slack URL is a credential),
// attempts and last answer; the run's owner sees the page without it, and
// a delivered or pending notification shows to nobody.
func TestRunPageShowsFailedDeliveriesToAdmins(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "refund")
	other, _ := a.Waiting(t, "refund")
	insert := func(run int64, status string, attempts int, lastStatus any, lastError any) int64 {
		t.Helper()
		res, err := a.DB.Exec(`INSERT INTO webhook_deliveries (webhook_id, run_id, configuration_id, event, url, body,
				status, attempts, last_status, last_error)
			VALUES (CONCAT('msg_', REPLACE(UUID(), '-', '')), ?, 1, 'run.waiting', ?, '{}', ?, ?, ?, ?)`,
			run, fmt.Sprintf("https://hooks.example.com/%s/%d?token=s3cret", status, run), status, attempts, lastStatus, lastError)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := res.LastInsertId()
		return id
	}
	failed := insert(paused.RunID, "failed", 17, 503, "upstream <down>")
	insert(paused.RunID, "delivered", 1, 204, nil)
	insert(paused.RunID, "pending", 3, nil, "timeout after 10s")
	insert(other.RunID, "failed", 17, nil, "connection refused")

	res, body := a.as(t, "admin").get(runPath(paused.RunID, ""))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s as admin: %d", runPath(paused.RunID, ""), res.StatusCode)
	}
	doc := parsePage(t, body)
	section := node(t, doc, "section", "data-testid", "failed-deliveries")
	rows := nodes(section, "tr", "data-testid", "failed-delivery")
	if len(rows) != 1 {
		t.Fatalf("failed deliveries shown: %d, want 1 (the run's failed one only): %q", len(rows), textOf(section))
	}
	row := rows[0]
	if id, _ := attrOf(row, "data-delivery-id"); id != fmt.Sprint(failed) {
		t.Errorf("the row is of delivery %s, want %d", id, failed)
	}
	for key, want := range map[string]string{
		"delivery-target":   "https://hooks.example.com",
		"delivery-attempts": "17",
		"delivery-last":     "503: upstream <down>",
	} {
		if got := textOf(node(t, row, "td", "data-testid", key)); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if !strings.Contains(textOf(section), "turnstile webhooks retry --id N") {
		t.Errorf("the section does not say how to send one again: %q", textOf(section))
	}
	if strings.Contains(body, "s3cret") || strings.Contains(body, "/failed/") {
		t.Error("the page shows a webhook URL's path or query")
	}
	if strings.Contains(body, "upstream <down>") {
		t.Error("a receiver's error reaches the page unescaped")
	}

	// The owner may read the run, but not its notifications.
	res, body = a.as(t, "owner").get(runPath(paused.RunID, ""))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s as owner: %d", runPath(paused.RunID, ""), res.StatusCode)
	}
	if strings.Contains(body, "failed-deliveries") || strings.Contains(body, "hooks.example.com") {
		t.Error("the run's owner, no admin, sees its failed notifications")
	}

	// A run without failed notifications has no section.
	if err := a.Store.RetryDelivery(t.Context(), failed); err != nil {
		t.Fatal(err)
	}
	_, body = a.as(t, "admin").get(runPath(paused.RunID, ""))
	if strings.Contains(body, "failed-deliveries") {
		t.Error("after the retry the page still shows a failed notification")
	}
}
