package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/turnstile-dev/turnstile/runtime/outbox"
)

// The delivery loops count their attempts here.
var _ outbox.Metrics = (*Metrics)(nil)

// webhookResults are the results of one delivery attempt, as the delivery
// code reports them: delivered (a 2xx answer), retry (failed; another
// attempt is due later), failed (failed, and given up on).
var webhookResults = []string{"delivered", "retry", "failed"}

// newWebhookCounter registers turnstile_webhook_deliveries_total with its
// three series at 0, so that a rate() of failures works before the first.
func newWebhookCounter(reg *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "turnstile_webhook_deliveries_total",
		Help: "Webhook delivery attempts by this process's workers, by result: delivered (2xx), retry (failed, tried again later), failed (given up)."},
		[]string{"result"})
	for _, r := range webhookResults {
		c.WithLabelValues(r)
	}
	reg.MustRegister(c)
	return c
}

// WebhookDelivered counts one delivery attempt by its result: "delivered",
// "retry" or "failed". It implements outbox.Metrics, which the
// delivery code declares; it is cheap and never blocks.
func (m *Metrics) WebhookDelivered(result string) {
	if m != nil {
		m.webhooks.WithLabelValues(result).Inc()
	}
}

// Outbox is what the metrics read of the webhook outbox at scrape time.
type Outbox interface {
	// OldestPendingAge is how long the oldest pending delivery has
	// existed; false when none is pending.
	OldestPendingAge(ctx context.Context) (time.Duration, bool, error)
}

// WatchOutbox adds turnstile_webhook_oldest_pending_seconds, the age of
// the oldest pending delivery in the whole cluster, read from the database
// at each scrape. It errors when called twice.
func (m *Metrics) WatchOutbox(o Outbox) error {
	return m.reg.Register(&outboxCollector{outbox: o, log: m.log,
		age: prometheus.NewDesc("turnstile_webhook_oldest_pending_seconds",
			"How long the oldest pending webhook delivery has existed, in the whole cluster (read from the database); 0 when none is pending.", nil, nil)})
}

// outboxCollector reads the outbox at each scrape, within scrapeTimeout;
// a value it cannot read is left out of that scrape (and logged).
type outboxCollector struct {
	outbox Outbox
	log    *slog.Logger
	age    *prometheus.Desc
}

func (c *outboxCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.age }

func (c *outboxCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	age, _, err := c.outbox.OldestPendingAge(ctx)
	if err != nil {
		c.log.Warn("metrics: oldest pending webhook delivery", "err", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age.Seconds())
}
