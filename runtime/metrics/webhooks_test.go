package metrics_test

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime/metrics"
)

// outbox answers the scrape's question with what a test set.
type outbox struct {
	age time.Duration
	ok  bool
	err error
}

func (o *outbox) OldestPendingAge(context.Context) (time.Duration, bool, error) {
	return o.age, o.ok, o.err
}

func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestWebhookMetrics(t *testing.T) {
	m := metrics.New(nil)
	o := &outbox{}
	if err := m.WatchOutbox(o); err != nil {
		t.Fatal(err)
	}
	if err := m.WatchOutbox(o); err == nil {
		t.Error("a second WatchOutbox is no error")
	}
	body := scrape(t, m)
	for _, want := range []string{
		`turnstile_webhook_deliveries_total{result="delivered"} 0`,
		`turnstile_webhook_deliveries_total{result="retry"} 0`,
		`turnstile_webhook_deliveries_total{result="failed"} 0`,
		"turnstile_webhook_oldest_pending_seconds 0",
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("before any delivery the scrape lacks %q", want)
		}
	}

	m.WebhookDelivered("retry")
	m.WebhookDelivered("retry")
	m.WebhookDelivered("delivered")
	o.age, o.ok = 90*time.Second+500*time.Millisecond, true
	body = scrape(t, m)
	for _, want := range []string{
		`turnstile_webhook_deliveries_total{result="delivered"} 1`,
		`turnstile_webhook_deliveries_total{result="retry"} 2`,
		`turnstile_webhook_deliveries_total{result="failed"} 0`,
		"turnstile_webhook_oldest_pending_seconds 90.5",
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("the scrape lacks %q", want)
		}
	}

	// A database that does not answer leaves the gauge out, not the scrape.
	o.err = errors.New("connection refused")
	if body = scrape(t, m); strings.Contains(body, "turnstile_webhook_oldest_pending_seconds ") ||
		!strings.Contains(body, `turnstile_webhook_deliveries_total{result="retry"} 2`) {
		t.Errorf("with the outbox unreadable the scrape reads:\n%s", body)
	}

	var none *metrics.Metrics // no metrics: counts nothing, safely
	none.WebhookDelivered("failed")
	if n := testing.AllocsPerRun(100, func() { m.WebhookDelivered("delivered") }); n != 0 {
		t.Errorf("%v allocations per delivery attempt, want 0", n)
	}
}
