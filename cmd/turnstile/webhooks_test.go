package main

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// outboxRow inserts a delivery as the delivery code would leave it.
func outboxRow(t *testing.T, db *sqlx.DB, webhookID string, run int64, status string, attempts int, lastStatus any, lastError any) int64 {
	t.Helper()
	res, err := db.Exec(`INSERT INTO webhook_deliveries (webhook_id, run_id, configuration_id, event, url, body, status,
			attempts, next_attempt_at, last_status, last_error)
		VALUES (?, ?, 1, 'run.waiting', 'https://hooks.example.com/services/T0/B0/s3cret?token=s3cret', '{}', ?, ?, '2026-12-01 10:00:00', ?, ?)`,
		webhookID, run, status, attempts, lastStatus, lastError)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.LastInsertId()
	return id
}

// TestWebhooksCommands: list shows every delivery newest first as a
// table (a receiver's multi-line error kept on its row; of the URL, its
// scheme and host only: a Slack URL is a credential), --failed only
// the given-up ones; retry makes a failed one pending and due, and refuses
// the others with what they are, writing nothing.
func TestWebhooksCommands(t *testing.T) {
	db, dsn := dbtest.New(t)
	delivered := outboxRow(t, db, "msg_delivered", 7, "delivered", 1, 204, nil)
	failed := outboxRow(t, db, "msg_failed", 7, "failed", 17, 502, "502 Bad Gateway:\n<html>\tupstream down</html>")
	pending := outboxRow(t, db, "msg_pending", 8, "pending", 2, nil, "dial tcp 10.0.0.9:443: connection refused")

	stdout, stderr, err := turnstile(t, dsn, "webhooks", "list")
	if err != nil {
		t.Fatalf("webhooks list: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("webhooks list printed %d lines, want a header and 3 rows:\n%s", len(lines), stdout)
	}
	header := regexp.MustCompile(`^ID\s+WEBHOOK ID\s+RUN\s+EVENT\s+TARGET\s+STATUS\s+ATTEMPTS\s+LAST\s+NEXT ATTEMPT$`)
	if !header.MatchString(lines[0]) {
		t.Errorf("header = %q", lines[0])
	}
	for i, want := range []string{
		fmt.Sprintf(`^%d\s+msg_pending\s+8\s+run.waiting\s+https://hooks.example.com\s+pending\s+2\s+dial tcp 10.0.0.9:443: connection refused\s+2026-12-01 10:00:00Z$`, pending),
		fmt.Sprintf(`^%d\s+msg_failed\s+7\s+run.waiting\s+https://hooks.example.com\s+failed\s+17\s+502: 502 Bad Gateway: <html> upstream down</html>\s+-$`, failed),
		fmt.Sprintf(`^%d\s+msg_delivered\s+7\s+run.waiting\s+https://hooks.example.com\s+delivered\s+1\s+204\s+-$`, delivered),
	} {
		if !regexp.MustCompile(want).MatchString(lines[i+1]) {
			t.Errorf("row %d = %q, want to match %s", i+1, lines[i+1], want)
		}
	}

	if strings.Contains(stdout, "s3cret") || strings.Contains(stdout, "/services/") {
		t.Errorf("webhooks list shows more of a URL than its scheme and host:\n%s", stdout)
	}

	stdout, _, err = turnstile(t, dsn, "webhooks", "list", "--failed")
	if err != nil {
		t.Fatal(err)
	}
	if rows := strings.Split(strings.TrimRight(stdout, "\n"), "\n"); len(rows) != 2 || !strings.Contains(rows[1], "msg_failed") {
		t.Errorf("webhooks list --failed =\n%s\nwant the header and the failed delivery", stdout)
	}
	if stdout, _, _ := turnstile(t, dsn, "webhooks", "list", "--limit", "1"); strings.Count(stdout, "\n") != 2 || !strings.Contains(stdout, "msg_pending") {
		t.Errorf("webhooks list --limit 1 =\n%s\nwant the newest alone", stdout)
	}

	snapshot := func() string {
		var rows []string
		if err := db.Select(&rows, `SELECT CONCAT_WS('/', id, status, attempts, next_attempt_at) FROM webhook_deliveries ORDER BY id`); err != nil {
			t.Fatal(err)
		}
		return strings.Join(rows, "\n")
	}
	before := snapshot()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"webhooks", "retry"}, "webhooks retry: --id is required (see turnstile webhooks list --failed)"},
		{[]string{"webhooks", "retry", "--id", "999"}, "webhooks retry: no delivery 999 (see turnstile webhooks list)"},
		{[]string{"webhooks", "retry", "--id", fmt.Sprint(pending)}, fmt.Sprintf("webhooks retry: delivery %d is pending, not failed; only a failed delivery is retried by hand (the workers retry it themselves)", pending)},
		{[]string{"webhooks", "retry", "--id", fmt.Sprint(delivered)}, fmt.Sprintf("webhooks retry: delivery %d is delivered, not failed; only a failed delivery is retried by hand (it arrived)", delivered)},
		{[]string{"webhooks", "list", "--limit", "0"}, "webhooks list: --limit must be between 1 and 1000, not 0"},
		{[]string{"webhooks", "resend"}, webhooksUsage},
		{[]string{"webhooks", "list", "extra"}, `webhooks list: unexpected arguments ["extra"]`},
	} {
		_, _, err := turnstile(t, dsn, tc.args...)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("turnstile %s = %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if after := snapshot(); after != before {
		t.Errorf("a refused command changed the outbox:\n%s\n%s", before, after)
	}

	stdout, _, err = turnstile(t, dsn, "webhooks", "retry", "--id", fmt.Sprint(failed))
	if err != nil || stdout != fmt.Sprintf("delivery %d is pending again and due now; a worker sends it with the same webhook-id\n", failed) {
		t.Fatalf("webhooks retry = %q, %v", stdout, err)
	}
	ds, err := store.New(db).ListDeliveries(context.Background(), false, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.ID == failed && (!d.Pending() || d.Attempts != 17 || d.WebhookID != "msg_failed") {
			t.Errorf("after the retry: %+v; want pending, 17 attempts, the same webhook id", d)
		}
	}
}

// TestConfigApplyWarnsAboutAnUnsetSecret: a notify entry whose secret_env
// is unset here is stored, with a warning that names the line and the
// variable; a broken entry is refused with its line and nothing stored.
func TestConfigApplyWarnsAboutAnUnsetSecret(t *testing.T) {
	db, dsn := dbtest.New(t)
	src := agentYAML + `notify:
  - url: https://hooks.example.com/t
    secret_env: HOOK_SECRET
`
	path := writeFile(t, "agent.yaml", src)
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"config", "apply", path}, func(k string) string {
		return map[string]string{"TURNSTILE_DSN": dsn}[k]
	}, strings.NewReader(""), &out, &errOut)
	if err != nil || !strings.HasSuffix(out.String(), " created\n") {
		t.Fatalf("config apply = %q, %v (stderr %q)", out.String(), err, errOut.String())
	}
	line := strings.Count(src[:strings.Index(src, "secret_env")], "\n") + 1
	want := fmt.Sprintf("%s:%d: warning: notify entry 1 (https://hooks.example.com): environment variable HOOK_SECRET is unset here; deliveries need it where turnstile serve and work run\n", path, line)
	if errOut.String() != want {
		t.Errorf("stderr = %q\nwant %q", errOut.String(), want)
	}
	stdout, _, err := turnstile(t, dsn, "config", "export", "helpdesk")
	if err != nil || !strings.Contains(stdout, "notify:\n  - url: https://hooks.example.com/t\n    secret_env: HOOK_SECRET\n") {
		t.Errorf("config export = %v\n%s\nwant the notify entry", err, stdout)
	}

	// With the secret set: no warning.
	errOut.Reset()
	out.Reset()
	err = run(context.Background(), []string{"config", "apply", path}, func(k string) string {
		return map[string]string{"TURNSTILE_DSN": dsn, "HOOK_SECRET": "s3cret"}[k]
	}, strings.NewReader(""), &out, &errOut)
	if err != nil || errOut.Len() != 0 {
		t.Errorf("config apply with the secret set = %v, stderr %q", err, errOut.String())
	}

	before := storedConfigs(t, db)
	bad := writeFile(t, "bad.yaml", strings.Replace(src, "https://hooks.example.com/t", "ftp://hooks.example.com/t", 1)+"    events: [run.started]\n")
	_, _, err = turnstile(t, dsn, "config", "apply", bad)
	wantErr := fmt.Sprintf("%s:%d: notify entry 1: url must be http or https, not \"ftp://hooks.example.com/t\"\n%s:%d: notify entry 1: events: unknown event \"run.started\" (allowed: run.waiting, run.settled, run.expired, run.escalated, run.voted)",
		bad, line-1, bad, line+1)
	if err == nil || err.Error() != wantErr {
		t.Errorf("config apply of a broken entry = %v\nwant %s", err, wantErr)
	}
	if after := storedConfigs(t, db); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a refused file changed the configurations")
	}
}
