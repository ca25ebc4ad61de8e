package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// A server killed with SIGKILL right after the commit that settled a run,
// before anyone delivered its run.settled: a new process delivers it,
// signed, once.
func TestKilledServerNotificationIsDeliveredByANewProcess(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	type hit struct {
		header http.Header
		body   []byte
	}
	var mu sync.Mutex
	var hits []hit
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		hits = append(hits, hit{r.Header.Clone(), b})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rc.Close()
	received := func() []hit {
		mu.Lock()
		defer mu.Unlock()
		return append([]hit(nil), hits...)
	}

	r := newRig(t, pacedYAML("told", 0, 0, 0))
	ctx := context.Background()
	cfg, err := r.Store.ConfigurationByIdentifier(ctx, "told")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Notify = []runtime.Notify{{URL: rc.URL + "/hook", SecretEnv: "TEST_WEBHOOK_SECRET", Events: []string{runtime.EventRunSettled}}}
	if err := r.Store.SaveConfiguration(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	w := r.waiting(t, "told")

	// No workers: the server settles the run in the request and delivers
	// nothing.
	env := childEnv("TEST_WEBHOOK_SECRET=" + secret)
	addr := freeAddr(t)
	s := startServer(t, addr, env, "--addr", addr, "--dsn", r.DSN, "--workers", "0", "--public-url", "https://turnstile.test/")
	b := signIn(t, s.addr, "operator")
	page := b.inbox(t)
	resp := b.decide(t, w.id, page.digests[w.id], false)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("decision answered %d, want 303", resp.StatusCode)
	}
	r.WaitStatus(t, w.id, runtime.StatusCompleted, 20*time.Second)
	var webhookID string
	if err := r.DB.Get(&webhookID, `SELECT webhook_id FROM webhook_deliveries WHERE run_id = ? AND event = 'run.settled' AND status = 'pending' AND attempts = 0`, w.id); err != nil {
		t.Fatalf("no pending run.settled in the outbox after the settle: %v", err)
	}
	kill9(t, s)
	if n := len(received()); n != 0 {
		t.Fatalf("the receiver got %d requests from a server without workers", n)
	}

	// The receiver is a local httptest server.
	p := startChild(t, env, "work", "--dsn", r.DSN, "--workers", "1", "--webhook-allow-private")
	waitWorkerRow(t, r, p.cmd.Process.Pid, 30*time.Second)
	if !testrig.Eventually(20*time.Second, func() bool {
		return r.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE webhook_id = ? AND status = 'delivered'`, webhookID) == 1
	}) {
		t.Fatalf("the new process did not deliver %s within 20s; stderr:\n%s", webhookID, p.stderr)
	}
	// work was given no --public-url while a configuration notifies.
	if !logged(p.logLines(t), "notifications link to a guessed address",
		map[string]any{"public_url": "http://127.0.0.1:8080", "configuration": "told"}) {
		t.Errorf("turnstile work without --public-url did not warn; stderr:\n%s", p.stderr)
	}
	if logged(s.logLines(t), "notifications link to a guessed address", nil) {
		t.Errorf("serve warned about --public-url although it was given")
	}
	got := received()
	if len(got) != 1 || got[0].header.Get("webhook-id") != webhookID {
		t.Fatalf("receiver got %d requests (%v), want exactly %s once", len(got), got, webhookID)
	}
	lib, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := lib.Verify(got[0].body, got[0].header); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}
	var body struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(got[0].body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Type != runtime.EventRunSettled || body.Data["termination_reason"] != runtime.ReasonCompleted ||
		body.Data["run_url"] != fmt.Sprintf("https://turnstile.test/runs/%d", w.id) {
		t.Errorf("body = %s, want run.settled, completed, linking the --public-url", got[0].body)
	}
}
