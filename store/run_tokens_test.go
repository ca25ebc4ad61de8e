package store_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

var runTokenForm = regexp.MustCompile(`^tsr_[0-9a-f]{64}$`)

// A run credential is stored as its hash only, acts for the run's owner
// while the run runs under the live claim it was minted for, is replaced
// by the next one, slides to its lifetime again, and is swept once
// expired.
func TestRunTokens(t *testing.T) {
	w := testrig.New(t, testrig.Configs(bulkYAML))
	ctx := context.Background()
	out, _ := w.Waiting(t, "refund")
	owner := w.Actor("owner")
	set := func(assignments string) {
		t.Helper()
		if _, err := w.DB.Exec(`UPDATE runs SET `+assignments+` WHERE id = ?`, out.RunID); err != nil {
			t.Fatal(err)
		}
	}
	inactive := func(what, tok string) {
		t.Helper()
		if _, err := w.Store.IntrospectRunToken(ctx, tok); !errors.Is(err, runtime.ErrTokenInvalid) {
			t.Errorf("%s: IntrospectRunToken = %v, want ErrTokenInvalid", what, err)
		}
	}
	held := `status = 'running', claimed_by = 'holder', lease_expires_at = NOW(6) + INTERVAL 1 MINUTE`
	set(held)

	tok, err := w.Store.MintRunToken(ctx, out.RunID, owner.ID, "holder", time.Hour)
	if err != nil || !runTokenForm.MatchString(tok) {
		t.Fatalf("MintRunToken = %q, %v; want tsr_ and 64 hex digits", tok, err)
	}
	if n := w.Count(t, `SELECT COUNT(*) FROM run_tokens WHERE token_hash = ?`, tok); n != 0 {
		t.Fatal("the credential itself is stored")
	}
	id, err := w.Store.IntrospectRunToken(ctx, tok)
	if err != nil || id.User.Name != "owner" || id.RunID != out.RunID || id.Configuration != "refund" ||
		id.ExpiresAt.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("IntrospectRunToken = %+v, %v; want the owner, the run, the agent, an hour", id, err)
	}

	// Inactive alike: malformed, unknown, an API token's form.
	for _, bad := range []string{"", "tsr_", "x", strings.Repeat("z", 5000), "tsr_" + strings.Repeat("0", 64), "tst_" + tok[4:], tok + "0"} {
		inactive("malformed or unknown", bad)
	}

	// The run's commits revoke it: a pause, another holder's claim, a
	// lease its holder stopped renewing.
	set(`status = 'waiting_for_approval'`)
	inactive("paused", tok)
	set(held + `, claimed_by = 'another'`)
	inactive("taken over", tok)
	set(held + `, lease_expires_at = NOW(6) - INTERVAL 1 SECOND`)
	inactive("lease lapsed", tok)
	set(held)
	if _, err := w.Store.IntrospectRunToken(ctx, tok); err != nil {
		t.Errorf("held again under its claim: %v", err)
	}

	// Minting again replaces: the first is inactive.
	second, err := w.Store.MintRunToken(ctx, out.RunID, owner.ID, "holder", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	inactive("replaced", tok)

	// A slide gives the lifetime again; an expired one never comes back.
	if _, err := w.DB.Exec(`UPDATE run_tokens SET expires_at = NOW(6) + INTERVAL 5 SECOND WHERE run_id = ?`, out.RunID); err != nil {
		t.Fatal(err)
	}
	if err := w.Store.SlideRunTokens(ctx, []int64{out.RunID, 999999}); err != nil {
		t.Fatal(err)
	}
	if id, err := w.Store.IntrospectRunToken(ctx, second); err != nil || id.ExpiresAt.Before(time.Now().Add(59*time.Minute)) {
		t.Errorf("after a slide: %+v, %v; want an hour again", id, err)
	}
	if _, err := w.DB.Exec(`UPDATE run_tokens SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE run_id = ?`, out.RunID); err != nil {
		t.Fatal(err)
	}
	if err := w.Store.SlideRunTokens(ctx, []int64{out.RunID}); err != nil {
		t.Fatal(err)
	}
	inactive("expired, then slid", second)
	if n, err := w.Store.DeleteExpiredRunTokens(ctx, 10); err != nil || n != 1 {
		t.Errorf("DeleteExpiredRunTokens = %d, %v; want 1", n, err)
	}
	if n := w.Count(t, `SELECT COUNT(*) FROM run_tokens`); n != 0 {
		t.Errorf("%d run_tokens rows after the sweep, want 0", n)
	}
}
