package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// authenticatesUntil polls a cached Authenticate until the token is
// refused, and returns how long that took; it fails the test when the
// token still works after within.
func authenticatesUntil(t *testing.T, auth func() error, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := auth()
		if errors.Is(err, runtime.ErrTokenInvalid) {
			return time.Since(start)
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(start) > within {
			t.Fatalf("the token still works %s after it was revoked", within)
		}
		time.Sleep(10 * time.Millisecond) // a poll with a deadline, not synchronisation
	}
}

// TestTokenCacheAnswersFromMemoryForItsTTL: a token seen valid is answered
// without the database for the cache's ttl — a revoked token still works
// right after the revocation, the proof that no lookup happened — and is
// refused once the ttl passed. A bad token is never cached.
func TestTokenCacheAnswersFromMemoryForItsTTL(t *testing.T) {
	ctx := context.Background()
	s, _ := newTokenStore(t)
	u := createUser(t, s, runtime.User{Name: "integrator", Grants: []string{runtime.GrantApprove}})
	plain, tok, err := s.CreateToken(ctx, u.ID, []string{runtime.ScopeRunDecide}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cache := s.CachedTokens(500 * time.Millisecond)
	got, scopes, err := cache.Authenticate(ctx, plain)
	if err != nil || got.ID != u.ID || len(scopes) != 1 || scopes[0] != runtime.ScopeRunDecide || len(got.Grants) != 1 {
		t.Fatalf("Authenticate = %+v, %v, %v", got, scopes, err)
	}
	got.Grants[0] = "changed by the caller"
	if err := s.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	again, _, err := cache.Authenticate(ctx, plain)
	if err != nil || again.Grants[0] != runtime.GrantApprove {
		t.Fatalf("right after the revocation: %+v, %v; want the cached user, unchanged by what a caller did to its copy", again, err)
	}
	took := authenticatesUntil(t, func() error { _, _, err := cache.Authenticate(ctx, plain); return err }, 2*time.Second)
	if took < 300*time.Millisecond || took > 1500*time.Millisecond {
		t.Errorf("refused %s after the revocation, want after most of the 500 ms ttl, and soon after it", took)
	}
	if _, _, err := cache.Authenticate(ctx, "tst_"+"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"); !errors.Is(err, runtime.ErrTokenInvalid) {
		t.Errorf("an unknown token: err = %v, want ErrTokenInvalid", err)
	}
}

// TestTokenCacheNeverStretchesAnExpiry: an entry lives at most half the
// token's remaining life, however long the cache's ttl, so a short-lived
// token stops working when it should.
func TestTokenCacheNeverStretchesAnExpiry(t *testing.T) {
	ctx := context.Background()
	s, db := newTokenStore(t)
	u := createUser(t, s, runtime.User{Name: "integrator"})
	plain, tok, err := s.CreateToken(ctx, u.ID, []string{runtime.ScopeRunRead}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cache := s.CachedTokens(time.Hour)
	if _, _, err := cache.Authenticate(ctx, plain); err != nil {
		t.Fatal(err)
	}
	// Used just now, so it does not slide; it expires in 400 ms from here.
	if _, err := db.Exec(`UPDATE api_tokens SET expires_at = NOW(6) + INTERVAL 400000 MICROSECOND WHERE id = ?`, tok.ID); err != nil {
		t.Fatal(err)
	}
	cache = s.CachedTokens(time.Hour) // a fresh cache sees the new expiry
	if _, _, err := cache.Authenticate(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if took := authenticatesUntil(t, func() error { _, _, err := cache.Authenticate(ctx, plain); return err }, 3*time.Second); took > time.Second {
		t.Errorf("a token 400 ms from its expiry was refused after %s, want within about 400 ms", took)
	}
}

// TestRunForDecisionSeesAnEditedConfiguration: the decoded configuration
// is reused only while its definition is byte for byte the same; an edit
// and a switch-off are seen at the next read.
func TestRunForDecisionSeesAnEditedConfiguration(t *testing.T) {
	ctx := context.Background()
	s, _ := newTokenStore(t)
	owner := createUser(t, s, runtime.User{Name: "owner"})
	cfg := &runtime.Configuration{Identifier: "cached", Name: "First", Active: true,
		Provider: runtime.ProviderSpec{Type: "scripted"}, Tools: []string{"lookup_order"}, MaxIterations: 5,
		PrivacyLevel: runtime.PrivacyMetadata}
	if err := s.SaveConfiguration(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	r := &runtime.Run{ConfigurationID: cfg.ID, OwnerID: owner.ID, Origin: runtime.OriginInteractive,
		Status: runtime.StatusWaitingForApproval, State: []byte(`{}`), Prompt: "p"}
	if err := s.CreateRun(ctx, r, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	read := func() *runtime.Configuration {
		t.Helper()
		_, got, err := s.RunForDecision(ctx, r.ID)
		if err != nil || got == nil {
			t.Fatalf("RunForDecision = %v, %v", got, err)
		}
		return got
	}
	first := read()
	first.Name = "changed by a caller"
	if got := read(); got.Name != "First" || got.ID != cfg.ID || !got.Active {
		t.Errorf("second read = %q (id %d, active %v), want the stored First, unchanged by a caller", got.Name, got.ID, got.Active)
	}
	cfg.Name = "Second"
	if err := s.SaveConfiguration(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.Name != "Second" {
		t.Errorf("after an edit: name %q, want Second", got.Name)
	}
	if err := s.SetConfigurationActive(ctx, cfg.ID, false); err != nil {
		t.Fatal(err)
	}
	if got := read(); got.Active {
		t.Error("after switching it off: still active")
	}
}
