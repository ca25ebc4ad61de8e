// Package outbox delivers the notifications that the engine writes to the
// outbox table in the commit of the step that causes them: its loops claim
// due rows, open their bodies, hand them to a Sender (runtime/webhook sends
// them over HTTP) and record how each attempt went, retrying with backoff
// until a notification is delivered or given up. The engine only writes
// rows (runtime.Delivery); nothing in runtime imports this package.
package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Store is what delivery needs of the database.
type Store interface {
	// ClaimDeliveries claims up to n due notifications for one attempt
	// each (attempts counted, held from other claimers for hold); none
	// due is an empty list.
	ClaimDeliveries(ctx context.Context, n int, hold time.Duration) ([]runtime.Delivery, error)
	// MarkDelivered records an accepted delivery.
	MarkDelivered(ctx context.Context, id int64, status int) error
	// MarkRetry schedules attempt's next try after backoff; MarkFailed
	// gives the delivery up. Both change nothing when attempt is no longer
	// the delivery's latest (its claim lapsed and another took it).
	MarkRetry(ctx context.Context, id int64, attempt, status int, lastErr string, backoff time.Duration) error
	MarkFailed(ctx context.Context, id int64, attempt, status int, lastErr string) error
}

// Message is one attempt to send: the body in the clear, the
// Standard Webhooks id, and where the secret lives.
type Message struct {
	ID        string
	URL       string
	SecretEnv string
	Body      []byte
}

// SendResult is how one attempt went: the receiver's status (0 when none
// answered) and, unless it was a 2xx, why not. Permanent says retrying
// cannot help (the URL is refused), so the delivery fails at once.
type SendResult struct {
	Status    int
	Err       error
	Permanent bool
}

// Sender posts one notification; runtime/webhook sends it over HTTP.
type Sender interface {
	Send(ctx context.Context, m Message) SendResult
}

// The delivery schedule: a failed attempt is tried again after a backoff
// that doubles from DefaultBackoff up to DefaultMaxBackoff, and a
// notification not delivered DefaultGiveUp after it was written is failed.
const (
	DefaultBackoff    = time.Second
	DefaultMaxBackoff = 10 * time.Minute
	DefaultGiveUp     = 24 * time.Hour
	// DefaultDeliveryHold is how long a claimed attempt is kept from other
	// claimers: the send's 10 s timeout and a wide margin.
	DefaultDeliveryHold = 30 * time.Second
)

// Options are an Outbox's dependencies; Store and Sender are
// required.
type Options struct {
	Store  Store
	Sender Sender
	// Sealer opens the stored bodies; runtime.Plain when nil.
	Sealer  runtime.Sealer
	Metrics Metrics
	Logger  *slog.Logger
	// Batch is how many notifications one claim takes (default 16); they
	// are sent concurrently.
	Batch int
	// Poll is how long an idle loop waits before it looks again (default
	// 250 ms).
	Poll time.Duration
	// Backoff doubles from Backoff up to MaxBackoff between attempts;
	// after GiveUp since it was written a notification is failed. Hold:
	// see DefaultDeliveryHold. Zero takes the defaults.
	Backoff, MaxBackoff, GiveUp, Hold time.Duration
}

// Metrics is told the outcome of every delivery attempt: result is
// Delivered, Retry or Failed (given up, or refused for good).
type Metrics interface {
	WebhookDelivered(result string)
}

// The outcomes of a delivery attempt, as Metrics is told them.
const (
	Delivered = "delivered"
	Retry     = "retry"
	Failed    = "failed"
)

type noMetrics struct{}

func (noMetrics) WebhookDelivered(string) {}

// Outbox delivers the notifications that steps wrote to the outbox, at
// least once each, off every continuation's path: its loops have their
// own goroutines and take their own connections.
type Outbox struct {
	o Options
	// records bounds how many outcomes are written at once: a batch's
	// sends end together, and their writes must not take the pool's
	// connections from the continuations.
	records chan struct{}
}

// recordSlots is how many outcome writes an Outbox makes at once.
const recordSlots = 4

// New returns an outbox deliverer.
func New(o Options) *Outbox {
	if o.Sealer == nil {
		o.Sealer = runtime.Plain{}
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Batch <= 0 {
		o.Batch = 16
	}
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.GiveUp <= 0 {
		o.GiveUp = DefaultGiveUp
	}
	if o.Hold <= 0 {
		o.Hold = DefaultDeliveryHold
	}
	return &Outbox{o: o, records: make(chan struct{}, recordSlots)}
}

// Run runs n delivery loops until ctx ends. An attempt in flight when ctx
// ends is cut off; its notification is sent again once its hold passed.
func (b *Outbox) Run(ctx context.Context, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				got, err := b.DeliverDue(ctx)
				if err != nil && ctx.Err() == nil {
					b.o.Logger.Warn("claim notifications failed", "err", err)
				}
				if got == b.o.Batch {
					continue // more may be due
				}
				select {
				case <-ctx.Done():
				case <-time.After(b.o.Poll):
				}
			}
		})
	}
	wg.Wait()
}

// DeliverDue claims one batch of due notifications, attempts each, and
// records how each went; it returns how many it claimed.
func (b *Outbox) DeliverDue(ctx context.Context) (int, error) {
	ds, err := b.o.Store.ClaimDeliveries(ctx, b.o.Batch, b.o.Hold)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, d := range ds {
		wg.Go(func() { b.attempt(ctx, d) })
	}
	wg.Wait()
	return len(ds), nil
}

// attempt sends one claimed notification and records the outcome. The
// record is written even when ctx ended meanwhile: the attempt happened.
func (b *Outbox) attempt(ctx context.Context, d runtime.Delivery) {
	res := b.send(ctx, d)
	rec := context.WithoutCancel(ctx)
	b.records <- struct{}{}
	defer func() { <-b.records }()
	log := b.o.Logger.With("delivery", d.ID, "webhook_id", d.WebhookID, "event", d.Event, "run", d.RunID, "attempt", d.Attempts)
	if res.Err == nil {
		if err := b.o.Store.MarkDelivered(rec, d.ID, res.Status); err != nil {
			log.Warn("record delivered notification", "err", err)
		}
		b.o.Metrics.WebhookDelivered(Delivered)
		return
	}
	msg := res.Err.Error()
	wait := b.backoff(d.Attempts)
	if res.Permanent || d.Age+wait > b.o.GiveUp {
		if !res.Permanent {
			msg = fmt.Sprintf("gave up after %d attempts over %s: %s", d.Attempts, b.o.GiveUp, msg)
		}
		if err := b.o.Store.MarkFailed(rec, d.ID, d.Attempts, res.Status, msg); err != nil {
			log.Warn("record failed notification", "err", err)
		}
		b.o.Metrics.WebhookDelivered(Failed)
		log.Warn("notification failed", "status", res.Status, "err", msg)
		return
	}
	if err := b.o.Store.MarkRetry(rec, d.ID, d.Attempts, res.Status, msg, wait); err != nil {
		log.Warn("record notification retry", "err", err)
	}
	b.o.Metrics.WebhookDelivered(Retry)
	log.Info("notification will be retried", "status", res.Status, "err", msg, "in", wait.String())
}

// send opens the body and hands it to the sender.
func (b *Outbox) send(ctx context.Context, d runtime.Delivery) SendResult {
	body, err := b.o.Sealer.Open(d.Body, runtime.DeliveryPlace(d.RunID, d.WebhookID))
	switch {
	case errors.Is(err, runtime.ErrKeyMissing):
		// Another process may hold the key: retry, and fail only at the
		// give-up like any other retry.
		return SendResult{Err: errors.New("the body is sealed under a key this process does not hold")}
	case errors.Is(err, runtime.ErrNotSealed):
		// Written before state keys were set: state reseal seals it, and
		// a retry after that sends it.
		return SendResult{Err: errors.New("the body is stored unsealed; turnstile state reseal seals it")}
	case err != nil:
		return SendResult{Err: fmt.Errorf("the body does not open: %w", err), Permanent: true}
	}
	return b.o.Sender.Send(ctx, Message{ID: d.WebhookID, URL: d.URL, SecretEnv: d.SecretEnv, Body: body})
}

// backoff is the wait after a notification's attempt-th failed attempt:
// Backoff doubling, capped at MaxBackoff.
func (b *Outbox) backoff(attempt int) time.Duration {
	wait := b.o.Backoff
	for i := 1; i < attempt && wait < b.o.MaxBackoff; i++ {
		wait *= 2
	}
	return min(wait, b.o.MaxBackoff)
}
