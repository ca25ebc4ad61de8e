package outbox_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/outbox"
	"github.com/turnstile-dev/turnstile/runtime/webhook"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// BenchmarkOutboxDelivery measures deliveries per second: b.N signed
// notifications in the outbox, two workers (two loops each, batches of
// 16 sent concurrently) claiming with SKIP LOCKED, a local receiver that
// answers 204.
func BenchmarkOutboxDelivery(b *testing.B) {
	rc := newReceiver(b, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	w := outboxWorld(b, runtime.PrivacyMetadata)
	for done := 0; done < b.N; done += 1000 {
		insertDeliveries(b, w, min(1000, b.N-done), rc.URL, "TEST_WEBHOOK_SECRET")
	}
	b.ResetTimer()
	start := time.Now()
	for range 2 {
		runOutbox(b, outboxFor(w, outbox.Options{}, webhook.Options{}), 2)
	}
	if !testrig.Eventually(5*time.Minute, func() bool {
		return w.Count(b, `SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'delivered'`) == b.N
	}) {
		b.Fatalf("not all %d delivered", b.N)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
}
