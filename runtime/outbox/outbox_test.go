package outbox_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/outbox"
	"github.com/turnstile-dev/turnstile/runtime/seal"
	"github.com/turnstile-dev/turnstile/runtime/webhook"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// toldYAML pauses on a refund whose arguments carry a marker, at a
// privacy level.
const toldYAML = `
identifier: told
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}", reason: "MARKER-ARGUMENT"}
      - text: "refunded."
tools: [lookup_order, refund_order]
privacy_level: %s
`

// outboxWorld is a world with the configuration "told" at a privacy level,
// which notifies nobody until the test says whom (World.SetNotify).
func outboxWorld(t testing.TB, privacy runtime.PrivacyLevel) *testrig.World {
	t.Helper()
	return testrig.New(t, testrig.Configs(fmt.Sprintf(toldYAML, privacy)),
		testrig.Engine(runtime.Options{PublicURL: "https://turnstile.example/"}))
}

// testSecret is a Standard Webhooks secret: whsec_ and a base64 key.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// received is one request a receiver got.
type received struct {
	id, timestamp, signature, contentType string
	body                                  []byte
	at                                    time.Time
}

// receiver is a real local HTTP receiver that answers with what answer
// says for its nth request (from 0) and remembers every request.
type receiver struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	hits chan received
}

func newReceiver(t testing.TB, answer func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{hits: make(chan received, 1024)}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := received{id: r.Header.Get("webhook-id"), timestamp: r.Header.Get("webhook-timestamp"),
			signature: r.Header.Get("webhook-signature"), contentType: r.Header.Get("Content-Type"), body: body, at: time.Now()}
		rc.mu.Lock()
		n := len(rc.got)
		rc.got = append(rc.got, got)
		rc.mu.Unlock()
		select {
		case rc.hits <- got:
		default:
		}
		answer(n, w, r)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// verifyHMAC is a second, independent implementation of the Standard
// Webhooks signature: HMAC-SHA256 over id.timestamp.body with the key in
// the secret's base64, compared with each v1 signature of the header.
func verifyHMAC(secret string, got received) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.", got.id, got.timestamp)
	mac.Write(got.body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(got.signature) {
		v, b64, ok := strings.Cut(sig, ",")
		if !ok || v != "v1" {
			continue
		}
		if s, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(s, want) {
			return nil
		}
	}
	return fmt.Errorf("no v1 signature in %q matches", got.signature)
}

// recordingWebhooks remembers each attempt's result.
type recordingWebhooks struct {
	mu      sync.Mutex
	results []string
}

func (m *recordingWebhooks) WebhookDelivered(result string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.results = append(m.results, result)
}

func (m *recordingWebhooks) all() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.results)
}

// syncBuffer is a log destination the test reads while loops write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// outboxFor returns an outbox on the world's store with quick retries,
// the test secret in its environment, private targets allowed, and o's
// other settings.
func outboxFor(w *testrig.World, o outbox.Options, so webhook.Options) *outbox.Outbox {
	o.Store = w.Store
	if so.Getenv == nil {
		so.Getenv = func(name string) string {
			if name == "TEST_WEBHOOK_SECRET" {
				return testSecret
			}
			return ""
		}
	}
	// The receivers are local httptest servers.
	so.AllowPrivate = true
	o.Sender = webhook.New(so)
	if o.Backoff == 0 {
		o.Backoff = 20 * time.Millisecond
	}
	if o.Poll == 0 {
		o.Poll = 10 * time.Millisecond
	}
	return outbox.New(o)
}

// runOutbox runs an outbox's loops until the test ends.
func runOutbox(t testing.TB, ob *outbox.Outbox, loops int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ob.Run(ctx, loops); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// insertDeliveries writes n notifications of one run to url with a plain
// JSON body and returns their webhook ids.
func insertDeliveries(t testing.TB, w *testrig.World, n int, url, secretEnv string) []string {
	t.Helper()
	var q strings.Builder
	q.WriteString("INSERT INTO webhook_deliveries (webhook_id, run_id, configuration_id, event, url, secret_env, body) VALUES ")
	var args []any
	ids := make([]string, n)
	for i := range n {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, 1, 1, 'run.settled', ?, ?, ?)")
		ids[i] = fmt.Sprintf("msg_test_%d_%d", time.Now().UnixNano(), i)
		args = append(args, ids[i], url, secretEnv, []byte(fmt.Sprintf(`{"type":"run.settled","n":%d}`, i)))
	}
	if _, err := w.DB.Exec(q.String(), args...); err != nil {
		t.Fatal(err)
	}
	return ids
}

func waitDelivery(t testing.TB, w *testrig.World, id, status string, within time.Duration) testrig.OutboxRow {
	t.Helper()
	var r testrig.OutboxRow
	if !testrig.Eventually(within, func() bool { r = w.Delivery(t, id); return r.Status == status }) {
		t.Fatalf("notification %s is %+v after %s, want %s", id, r, within, status)
	}
	return r
}

func TestDeliveryIsSignedAndVerifiedIndependently(t *testing.T) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	w := outboxWorld(t, runtime.PrivacyMetadata)
	w.SetNotify(t, "told", []runtime.Notify{{URL: rc.URL + "/hook", SecretEnv: "TEST_WEBHOOK_SECRET"}})
	paused, _ := w.Waiting(t, "told")
	stored := w.Outbox(t, paused.RunID)
	if len(stored) != 1 {
		t.Fatalf("outbox = %+v, want one run.waiting", stored)
	}
	logs := &syncBuffer{}
	metrics := &recordingWebhooks{}
	runOutbox(t, outboxFor(w, outbox.Options{Metrics: metrics, Logger: slog.New(slog.NewJSONHandler(logs, nil))},
		webhook.Options{}), 1)

	row := waitDelivery(t, w, stored[0].WebhookID, "delivered", 10*time.Second)
	reqs := rc.requests()
	if len(reqs) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if got.id != stored[0].WebhookID || got.contentType != "application/json" || !bytes.Equal(got.body, stored[0].Body) {
		t.Errorf("request id %q type %q body %s; want id %s, application/json, the stored body", got.id, got.contentType, got.body, stored[0].WebhookID)
	}
	ts, err := strconv.ParseInt(got.timestamp, 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > 5*time.Second {
		t.Errorf("webhook-timestamp %q, want unix seconds of now", got.timestamp)
	}
	if err := verifyHMAC(testSecret, got); err != nil {
		t.Errorf("independent HMAC check: %v", err)
	}
	if err := verifyHMAC("whsec_"+base64.StdEncoding.EncodeToString([]byte("another key")), got); err == nil {
		t.Error("the check accepts a signature made with another key")
	}
	lib, err := standardwebhooks.NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Webhook-Id": {got.id}, "Webhook-Timestamp": {got.timestamp}, "Webhook-Signature": {got.signature}}
	if err := lib.Verify(got.body, h); err != nil {
		t.Errorf("the Standard Webhooks library does not verify it: %v", err)
	}
	if row.Attempts != 1 || row.LastStatus == nil || *row.LastStatus != http.StatusNoContent {
		t.Errorf("delivered row = %+v, want one attempt, last_status 204", row)
	}
	if got := metrics.all(); !slices.Equal(got, []string{outbox.Delivered}) {
		t.Errorf("attempts counted = %v, want [delivered]", got)
	}
	if strings.Contains(logs.String(), strings.TrimPrefix(testSecret, "whsec_")) {
		t.Errorf("the secret is in the log:\n%s", logs)
	}
}

func TestTwoFailuresThenSuccessKeepTheWebhookID(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch n {
		case 0:
			w.WriteHeader(http.StatusInternalServerError)
		case 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	w := outboxWorld(t, runtime.PrivacyMetadata)
	ids := insertDeliveries(t, w, 1, rc.URL, "TEST_WEBHOOK_SECRET")
	metrics := &recordingWebhooks{}
	runOutbox(t, outboxFor(w, outbox.Options{Metrics: metrics, Backoff: 50 * time.Millisecond}, webhook.Options{}), 2)

	row := waitDelivery(t, w, ids[0], "delivered", 10*time.Second)
	reqs := rc.requests()
	if len(reqs) != 3 || row.Attempts != 3 {
		t.Fatalf("receiver got %d requests and the row counts %d attempts, want 3 and 3", len(reqs), row.Attempts)
	}
	for i, r := range reqs {
		if r.id != ids[0] {
			t.Errorf("attempt %d has webhook-id %q, want %q on every attempt", i+1, r.id, ids[0])
		}
		if err := verifyHMAC(testSecret, r); err != nil {
			t.Errorf("attempt %d: %v", i+1, err)
		}
	}
	// Backoff 50 ms, then 100 ms: the second wait doubles the first.
	if gap1, gap2 := reqs[1].at.Sub(reqs[0].at), reqs[2].at.Sub(reqs[1].at); gap1 < 50*time.Millisecond || gap2 < 100*time.Millisecond {
		t.Errorf("waits between attempts %s and %s, want at least 50ms and then 100ms", gap1, gap2)
	}
	want := []string{outbox.Retry, outbox.Retry, outbox.Delivered}
	if got := metrics.all(); !slices.Equal(got, want) {
		t.Errorf("attempts counted = %v, want %v", got, want)
	}
}

func TestTwoWorkersDeliverEachNotificationExactlyOnce(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("webhook-id")]++
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	w := outboxWorld(t, runtime.PrivacyMetadata)
	const n = 500
	ids := insertDeliveries(t, w, n, rc.URL, "TEST_WEBHOOK_SECRET")
	start := time.Now()
	// Two workers, each with its own loops and connection pool, on one
	// database: two processes as far as the outbox can tell.
	for range 2 {
		runOutbox(t, outboxFor(w, outbox.Options{}, webhook.Options{}), 2)
	}
	if !testrig.Eventually(60*time.Second, func() bool {
		return w.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'delivered'`) == n
	}) {
		t.Fatalf("%d of %d delivered within 60s", w.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'delivered'`), n)
	}
	took := time.Since(start)
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("notification %s was received %d times, want exactly once", id, seen[id])
		}
	}
	if len(seen) != n || len(rc.requests()) != n {
		t.Errorf("receiver saw %d ids in %d requests, want %d and %d", len(seen), len(rc.requests()), n, n)
	}
	if a := w.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE attempts <> 1`); a != 0 {
		t.Errorf("%d notifications took more than one attempt", a)
	}
	t.Logf("%d notifications delivered by two workers in %s: %.0f/s", n, took, float64(n)/took.Seconds())
}

// deliverOnce claims and attempts the due notifications once.
func deliverOnce(t testing.TB, ob *outbox.Outbox) {
	t.Helper()
	if _, err := ob.DeliverDue(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestMisbehavingReceiversNeverHoldDeliveryUp(t *testing.T) {
	w := outboxWorld(t, runtime.PrivacyMetadata)
	elsewhere := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	redirect := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusFound)
	})
	huge := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := bytes.Repeat([]byte("x"), 1<<20)
		for range 64 { // 64 MiB, unless the client hangs up first
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	slow := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	garbage, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { garbage.Close() })
	go func() {
		for {
			c, err := garbage.Accept()
			if err != nil {
				return
			}
			io.ReadAll(io.LimitReader(c, 1)) // the request's first byte
			c.Write([]byte("this is no HTTP at all\r\n\r\n"))
			c.Close()
		}
	}()
	self := freeLoopback(t)

	cases := []struct {
		name, url, status string
		lastStatus        int
		lastError         string
	}{
		{"redirect", redirect.URL, "pending", http.StatusFound, "HTTP 302: redirects are not followed"},
		{"huge body", huge.URL, "delivered", http.StatusOK, ""},
		{"slow", slow.URL, "pending", 0, "no response within the timeout"},
		{"garbage", "http://" + garbage.Addr().String(), "pending", 0, "no response: "},
		{"itself", "http://localhost:" + self + "/hook", "failed", 0, "refused: the URL points at Turnstile itself"},
		{"not http", "ftp://receiver.test/hook", "failed", 0, "refused: the URL is not an http or https URL"},
	}
	metrics := &recordingWebhooks{}
	ob := outboxFor(w, outbox.Options{Metrics: metrics, Backoff: time.Hour},
		webhook.Options{Timeout: 500 * time.Millisecond, Self: []string{"https://turnstile.example", "0.0.0.0:" + self}})
	ids := map[string]string{}
	for _, c := range cases {
		ids[c.name] = insertDeliveries(t, w, 1, c.url, "TEST_WEBHOOK_SECRET")[0]
	}
	start := time.Now()
	deliverOnce(t, ob) // one batch: every case at once
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("one round of attempts took %s, want about the 500ms timeout", took)
	}
	for _, c := range cases {
		r := w.Delivery(t, ids[c.name])
		last := 0
		if r.LastStatus != nil {
			last = *r.LastStatus
		}
		lastErr := ""
		if r.LastError != nil {
			lastErr = *r.LastError
		}
		if r.Status != c.status || r.Attempts != 1 || last != c.lastStatus || !strings.HasPrefix(lastErr, c.lastError) ||
			(c.lastError == "" && lastErr != "") {
			t.Errorf("%s: row = %s after %d attempts, last_status %d, last_error %q; want %s, 1, %d, %q",
				c.name, r.Status, r.Attempts, last, lastErr, c.status, c.lastStatus, c.lastError)
		}
		if strings.Contains(lastErr, "127.0.0.1:") && c.name != "itself" {
			t.Errorf("%s: last_error %q names the URL", c.name, lastErr)
		}
	}
	if n := len(elsewhere.requests()); n != 0 {
		t.Errorf("the redirect's target got %d requests, want none (redirects are not followed)", n)
	}
	got := metrics.all()
	slices.Sort(got)
	want := []string{"delivered", "failed", "failed", "retry", "retry", "retry"}
	if !slices.Equal(got, want) {
		t.Errorf("attempts counted = %v, want %v", got, want)
	}
}

// freeLoopback is a port nothing listens on.
func freeLoopback(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

func TestDeliveryGivesUpAfterADay(t *testing.T) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	w := outboxWorld(t, runtime.PrivacyMetadata)
	ids := insertDeliveries(t, w, 2, rc.URL, "TEST_WEBHOOK_SECRET")
	// The first was written almost a day ago: its next wait would end
	// past the day.
	if _, err := w.DB.Exec(`UPDATE webhook_deliveries SET created_at = NOW(6) - INTERVAL 86399 SECOND WHERE webhook_id = ?`, ids[0]); err != nil {
		t.Fatal(err)
	}
	metrics := &recordingWebhooks{}
	// The production schedule: 1 s doubling, 24 h.
	ob := outbox.New(outbox.Options{Store: w.Store, Metrics: metrics,
		Sender: webhook.New(webhook.Options{AllowPrivate: true, Getenv: func(string) string { return testSecret }})})
	deliverOnce(t, ob)
	old, fresh := w.Delivery(t, ids[0]), w.Delivery(t, ids[1])
	if old.Status != "failed" || old.LastError == nil || !strings.HasPrefix(*old.LastError, "gave up after 1 attempts over 24h0m0s: HTTP 502") {
		t.Errorf("day-old row = %+v (%v), want failed: gave up", old, deref(old.LastError))
	}
	if fresh.Status != "pending" || fresh.Attempts != 1 {
		t.Errorf("fresh row = %+v, want pending after one attempt", fresh)
	}
	var wait float64
	if err := w.DB.Get(&wait, `SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), next_attempt_at) / 1e6 FROM webhook_deliveries WHERE webhook_id = ?`, ids[1]); err != nil {
		t.Fatal(err)
	}
	if wait <= 0 || wait > 1 {
		t.Errorf("fresh row's next attempt in %.3fs, want within the first backoff of 1s", wait)
	}
	if n := w.Count(t, `SELECT COUNT(*) FROM webhook_deliveries`); n != 2 {
		t.Errorf("rows = %d", n)
	}
	// Nothing due: a second pass claims nothing.
	deliverOnce(t, ob)
	if got := metrics.all(); len(got) != 2 {
		t.Errorf("attempts counted = %v, want two (the second pass found nothing due)", got)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestUnsetSecretIsRetriedAndNamed(t *testing.T) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	w := outboxWorld(t, runtime.PrivacyMetadata)
	ids := insertDeliveries(t, w, 1, rc.URL, "NOT_SET_ANYWHERE")
	unsigned := insertDeliveries(t, w, 1, rc.URL, "")
	ob := outboxFor(w, outbox.Options{Backoff: time.Hour}, webhook.Options{})
	deliverOnce(t, ob)
	r := w.Delivery(t, ids[0])
	if r.Status != "pending" || deref(r.LastError) != "the secret's environment variable NOT_SET_ANYWHERE is not set" {
		t.Errorf("row = %s, %q; want pending, naming the unset variable", r.Status, deref(r.LastError))
	}
	if u := w.Delivery(t, unsigned[0]); u.Status != "delivered" {
		t.Errorf("a notification without secret_env is %s, want delivered unsigned", u.Status)
	}
	reqs := rc.requests()
	if len(reqs) != 1 || reqs[0].id != unsigned[0] || reqs[0].signature != "" {
		t.Errorf("receiver got %+v, want only the unsigned one, without webhook-signature", reqs)
	}
}

func TestASlowReceiverNeverBlocksAContinuation(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	w := outboxWorld(t, runtime.PrivacyMetadata)
	w.SetNotify(t, "told", []runtime.Notify{{URL: rc.URL}})
	runOutbox(t, outboxFor(w, outbox.Options{}, webhook.Options{}), 1)
	paused, _ := w.Waiting(t, "told")
	select {
	case <-rc.hits: // the run.waiting is in flight, and stays so
	case <-time.After(10 * time.Second):
		t.Fatal("the receiver got nothing within 10s")
	}
	done := make(chan runtime.Outcome, 1)
	go func() {
		c, err := w.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
			Decision: runtime.DecisionApprove, Actor: w.Actor("approver")})
		if err != nil {
			done <- runtime.Outcome{Err: err}
			return
		}
		done <- c.Run(context.Background(), nil)
	}()
	select {
	case out := <-done:
		if out.Status != runtime.StatusCompleted {
			t.Errorf("continuation ended %s (%v), want completed", out.Status, out.Err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the continuation did not finish within 8s while a receiver hung")
	}
	if n := w.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE run_id = ? AND status = 'pending'`, paused.RunID); n != 2 {
		t.Errorf("pending notifications = %d, want 2 (the hung run.waiting, the run.settled)", n)
	}
}

// With state keys set the stored body is sealed (at privacy level full it
// carries arguments); the outbox opens it and sends the JSON.
func TestSealedBodiesAreSentOpened(t *testing.T) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	keys, err := seal.Parse("A:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xA1}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	w := outboxWorld(t, runtime.PrivacyFull)
	w.SetNotify(t, "told", []runtime.Notify{{URL: rc.URL, SecretEnv: "TEST_WEBHOOK_SECRET"}})
	paused, _ := w.Start(t, testrig.Launch{Configuration: "told", Engine: w.NewEngine(runtime.Options{Sealer: keys})})
	rows := w.Outbox(t, paused.RunID)
	if len(rows) != 1 || bytes.HasPrefix(rows[0].Body, []byte("{")) || bytes.Contains(rows[0].Body, []byte("MARKER-ARGUMENT")) {
		t.Fatalf("stored body %q, want it sealed", rows[0].Body)
	}
	runOutbox(t, outboxFor(w, outbox.Options{Sealer: keys}, webhook.Options{}), 1)
	waitDelivery(t, w, rows[0].WebhookID, "delivered", 10*time.Second)
	got := rc.requests()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	if !bytes.Contains(got[0].body, []byte("MARKER-ARGUMENT")) || !bytes.Contains(got[0].body, []byte(`"type":"run.waiting"`)) {
		t.Errorf("receiver got body %q; want the opened run.waiting with its arguments", got[0].body)
	}
	if err := verifyHMAC(testSecret, got[0]); err != nil {
		t.Error(err)
	}
}

// TestPrivateTargetsFailAtOnceWithoutTheirAddress: with the production
// sender (no --webhook-allow-private), notifications to a loopback
// receiver and to the cloud metadata address fail at their first
// attempt, nothing reaches the receiver, and last_error says why without
// the address; the same receiver gets them once private targets are
// allowed.
func TestPrivateTargetsFailAtOnceWithoutTheirAddress(t *testing.T) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	w := outboxWorld(t, runtime.PrivacyMetadata)
	_, port, _ := net.SplitHostPort(rc.Listener.Addr().String())
	const allow = "; start with --webhook-allow-private to allow it"
	cases := []struct{ url, lastError string }{
		{rc.URL + "/hook", "target refused: a loopback address" + allow},
		{"http://localhost.:" + port + "/hook", "target refused: a loopback address" + allow},
		{"http://169.254.169.254/latest/meta-data/", "target refused: a link-local address" + allow},
	}
	ob := outbox.New(outbox.Options{Store: w.Store,
		Sender: webhook.New(webhook.Options{Timeout: time.Second, Getenv: func(string) string { return testSecret }})})
	var ids []string
	for _, c := range cases {
		ids = append(ids, insertDeliveries(t, w, 1, c.url, "TEST_WEBHOOK_SECRET")[0])
	}
	deliverOnce(t, ob)
	for i, c := range cases {
		r := w.Delivery(t, ids[i])
		if r.Status != "failed" || r.Attempts != 1 || r.LastError == nil || *r.LastError != c.lastError {
			t.Errorf("%s: row %s after %d attempts, last_error %q; want failed after 1: %q", c.url, r.Status, r.Attempts, deref(r.LastError), c.lastError)
		}
		if r.LastError != nil && (strings.Contains(*r.LastError, port) || strings.Contains(*r.LastError, "169.254")) {
			t.Errorf("%s: last_error %q names the address", c.url, *r.LastError)
		}
	}
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("the loopback receiver got %d requests, want none", n)
	}

	id := insertDeliveries(t, w, 1, rc.URL+"/hook", "TEST_WEBHOOK_SECRET")[0]
	deliverOnce(t, outboxFor(w, outbox.Options{}, webhook.Options{}))
	if r := w.Delivery(t, id); r.Status != "delivered" || len(rc.requests()) != 1 {
		t.Errorf("with private targets allowed: row %s, %d requests; want delivered once", r.Status, len(rc.requests()))
	}
}
