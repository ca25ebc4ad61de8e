package runtime_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alexedwards/scs/mysqlstore"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/metrics"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// deadRows gives the world's owner tokens — live, expired, revoked — and
// sessions — live and expired — and returns how many of each.
func deadRows(t *testing.T, w *testrig.World, expired, revoked, live, deadSessions, liveSessions int) {
	t.Helper()
	ctx := context.Background()
	for i := range expired + revoked + live {
		_, tok, err := w.Store.CreateToken(ctx, w.Users["owner"].ID, []string{runtime.ScopeRunRead}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		edit := ""
		switch {
		case i < expired:
			edit = "expires_at = NOW(6) - INTERVAL 1 SECOND"
		case i < expired+revoked:
			edit = "revoked_at = NOW(6)"
		}
		if edit != "" {
			if _, err := w.DB.Exec(`UPDATE api_tokens SET `+edit+` WHERE id = ?`, tok.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Two run credentials, one expired.
	for i, edit := range []string{"NOW(6) - INTERVAL 1 SECOND", "NOW(6) + INTERVAL 1 HOUR"} {
		if _, err := w.DB.Exec(`INSERT INTO run_tokens (run_id, owner_id, claimed_by, token_hash, ttl_seconds, expires_at)
			VALUES (?, ?, 'holder', SHA2(?, 256), 3600, `+edit+`)`, 1000+i, w.Users["owner"].ID, fmt.Sprint("tsr_", i)); err != nil {
			t.Fatal(err)
		}
	}
	sessions := mysqlstore.NewWithCleanupInterval(w.DB.DB, 0)
	for i := range deadSessions + liveSessions {
		expiry := time.Now().Add(time.Hour)
		if i < deadSessions {
			expiry = time.Now().Add(-time.Minute)
		}
		if err := sessions.Commit(fmt.Sprintf("session-%035d", i), []byte("data"), expiry); err != nil {
			t.Fatal(err)
		}
	}
}

// scrapeSwept reads turnstile_expired_deleted_total of a kind.
func scrapeSwept(t *testing.T, m *metrics.Metrics, kind string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	prefix := fmt.Sprintf("turnstile_expired_deleted_total{kind=%q} ", kind)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v
		}
	}
	return "missing"
}

// TestSweepDeletesTheDeadAndCountsThem: one pass deletes the expired and
// revoked tokens and the expired sessions, and nothing live, and the
// metric counts them by kind; a pass takes at most its bound of batches,
// leaving the rest to the next pass.
func TestSweepDeletesTheDeadAndCountsThem(t *testing.T) {
	w := testrig.New(t)
	deadRows(t, w, 4, 3, 2, 3, 1)
	m := metrics.New(nil)
	if got := scrapeSwept(t, m, runtime.SweptToken) + " " + scrapeSwept(t, m, runtime.SweptSession); got != "0 0" {
		t.Errorf("before any pass the counters read %s, want 0 0", got)
	}
	sw := runtime.NewSweeper(runtime.SweepOptions{Store: w.Store, Metrics: m, Batch: 2, Batches: 2})
	ctx := context.Background()
	tokensLeft := func() int { return w.Count(t, `SELECT COUNT(*) FROM api_tokens`) }
	sessionsLeft := func() int { return w.Count(t, `SELECT COUNT(*) FROM sessions`) }

	got, err := sw.Pass(ctx)
	if err != nil || got != (runtime.Swept{Tokens: 4, Sessions: 3, RunTokens: 1}) {
		t.Errorf("first pass = %+v, %v; want 4 tokens (two batches of 2), the 3 sessions and the expired run credential", got, err)
	}
	if n := w.Count(t, `SELECT COUNT(*) FROM run_tokens WHERE expires_at > NOW(6)`); n != 1 || w.Count(t, `SELECT COUNT(*) FROM run_tokens`) != 1 {
		t.Errorf("the live run credential is not the one left")
	}
	if n := tokensLeft(); n != 5 {
		t.Errorf("%d tokens after the first pass, want 5: 3 dead left for the next pass and the 2 live", n)
	}
	if n := sessionsLeft(); n != 1 {
		t.Errorf("%d sessions after the first pass, want the live one", n)
	}
	if got, err = sw.Pass(ctx); err != nil || got != (runtime.Swept{Tokens: 3}) {
		t.Errorf("second pass = %+v, %v; want the 3 dead tokens left", got, err)
	}
	if got, err = sw.Pass(ctx); err != nil || got != (runtime.Swept{}) {
		t.Errorf("third pass = %+v, %v; want nothing", got, err)
	}
	if n := tokensLeft(); n != 2 {
		t.Errorf("%d tokens left, want the 2 live ones", n)
	}
	if got := scrapeSwept(t, m, runtime.SweptToken) + " " + scrapeSwept(t, m, runtime.SweptSession); got != "7 3" {
		t.Errorf("the counters read %s, want 7 3", got)
	}
}

// TestSweeperRunsOnItsOwn: the loop a worker process runs sweeps without
// being asked, every Every, until its context ends.
func TestSweeperRunsOnItsOwn(t *testing.T) {
	w := testrig.New(t)
	deadRows(t, w, 1, 0, 1, 1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.NewSweeper(runtime.SweepOptions{Store: w.Store, Every: 20 * time.Millisecond}).Run(ctx)
	}()
	if !testrig.Eventually(10*time.Second, func() bool {
		return w.Count(t, `SELECT COUNT(*) FROM api_tokens`) == 1 && w.Count(t, `SELECT COUNT(*) FROM sessions`) == 1
	}) {
		t.Errorf("the sweeper left %d tokens and %d sessions, want 1 and 1", w.Count(t, `SELECT COUNT(*) FROM api_tokens`),
			w.Count(t, `SELECT COUNT(*) FROM sessions`))
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("the sweeper did not stop 10 s after its context ended")
	}
}
