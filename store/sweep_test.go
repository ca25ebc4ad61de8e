package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/alexedwards/scs/mysqlstore"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestDeleteDeadTokensAndSessions: a token is dead once it expired (its
// sliding expiry passed: no use can revive it) or was revoked, a session
// once its expiry passed; each delete takes at most its limit of them, the
// oldest first, and never a live one.
func TestDeleteDeadTokensAndSessions(t *testing.T) {
	ctx := context.Background()
	s, db := newTokenStore(t)
	u := createUser(t, s, runtime.User{Name: "ada"})
	token := func(edit string) int64 {
		t.Helper()
		_, tok, err := s.CreateToken(ctx, u.ID, []string{runtime.ScopeRunRead}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if edit != "" {
			if _, err := db.Exec(`UPDATE api_tokens SET `+edit+` WHERE id = ?`, tok.ID); err != nil {
				t.Fatal(err)
			}
		}
		return tok.ID
	}
	live := token("")
	used := token("last_used_at = NOW(6) - INTERVAL 1 DAY") // long unused, but not expired
	for range 2 {
		token("expires_at = NOW(6) - INTERVAL 1 SECOND")
	}
	token("revoked_at = NOW(6)")

	if n, err := s.DeleteDeadTokens(ctx, 2); err != nil || n != 2 {
		t.Errorf("DeleteDeadTokens(2) = %d, %v; want 2: its limit", n, err)
	}
	if n, err := s.DeleteDeadTokens(ctx, 10); err != nil || n != 1 {
		t.Errorf("DeleteDeadTokens(10) = %d, %v; want the 1 dead token left", n, err)
	}
	if n, err := s.DeleteDeadTokens(ctx, 10); err != nil || n != 0 {
		t.Errorf("DeleteDeadTokens with none dead = %d, %v; want 0", n, err)
	}
	var left []int64
	if err := db.Select(&left, `SELECT id FROM api_tokens ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0] != live || left[1] != used {
		t.Errorf("tokens left = %v, want the live ones %d and %d", left, live, used)
	}

	// Sessions as scs writes them.
	sessions := mysqlstore.NewWithCleanupInterval(db.DB, 0)
	for tok, expiry := range map[string]time.Time{
		"live-session-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": time.Now().Add(time.Hour),
		"dead-session-1aaaaaaaaaaaaaaaaaaaaaaaaaaaaa": time.Now().Add(-time.Second),
		"dead-session-2aaaaaaaaaaaaaaaaaaaaaaaaaaaaa": time.Now().Add(-time.Hour),
	} {
		if err := sessions.Commit(tok, []byte("data"), expiry); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.DeleteExpiredSessions(ctx, 1); err != nil || n != 1 {
		t.Errorf("DeleteExpiredSessions(1) = %d, %v; want 1: its limit", n, err)
	}
	if n, err := s.DeleteExpiredSessions(ctx, 10); err != nil || n != 1 {
		t.Errorf("DeleteExpiredSessions(10) = %d, %v; want the 1 expired session left", n, err)
	}
	var tokens []string
	if err := db.Select(&tokens, `SELECT token FROM sessions`); err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 1 || tokens[0] != "live-session-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
		t.Errorf("sessions left = %v, want the live one", tokens)
	}
	if _, found, err := sessions.Find(tokens[0]); err != nil || !found {
		t.Errorf("the live session no longer authenticates: %v, %v", found, err)
	}
}
