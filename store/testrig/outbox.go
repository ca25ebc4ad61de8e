package testrig

import (
	"context"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// OutboxRow is a notification as the outbox table holds it.
type OutboxRow struct {
	ID         int64   `db:"id"`
	WebhookID  string  `db:"webhook_id"`
	RunID      int64   `db:"run_id"`
	Event      string  `db:"event"`
	URL        string  `db:"url"`
	Format     string  `db:"format"`
	Body       []byte  `db:"body"`
	Status     string  `db:"status"`
	Attempts   int     `db:"attempts"`
	LastError  *string `db:"last_error"`
	LastStatus *int    `db:"last_status"`
}

const outboxColumns = `id, webhook_id, run_id, event, url, format, body, status, attempts, last_error, last_status`

// Outbox returns the notifications written for a run, in the order they
// were written.
func (w *World) Outbox(t testing.TB, runID int64) []OutboxRow {
	t.Helper()
	var rows []OutboxRow
	if err := w.DB.Select(&rows, `SELECT `+outboxColumns+` FROM webhook_deliveries WHERE run_id = ? ORDER BY id`, runID); err != nil {
		t.Fatal(err)
	}
	return rows
}

// Delivery returns the notification with a Standard Webhooks id.
func (w *World) Delivery(t testing.TB, webhookID string) OutboxRow {
	t.Helper()
	var r OutboxRow
	if err := w.DB.Get(&r, `SELECT `+outboxColumns+` FROM webhook_deliveries WHERE webhook_id = ?`, webhookID); err != nil {
		t.Fatal(err)
	}
	return r
}

// SetNotify gives a saved configuration its notify entries through the
// store, as config apply does once it has read them.
func (w *World) SetNotify(t testing.TB, identifier string, endpoints []runtime.Notify) {
	t.Helper()
	ctx := context.Background()
	cfg, err := w.Store.ConfigurationByIdentifier(ctx, identifier)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Notify = endpoints
	if err := w.Store.SaveConfiguration(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}
