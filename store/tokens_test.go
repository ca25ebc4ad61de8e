package store_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

var tokenForm = regexp.MustCompile(`^tst_[0-9a-f]{64}$`)

func newTokenStore(t *testing.T) (*store.Store, *sqlx.DB) {
	t.Helper()
	db, _ := dbtest.New(t)
	return store.New(db), db
}

// tokenRow is a token's row as the database holds it.
type tokenRow struct {
	Hash       string     `db:"token_hash"`
	Prefix     string     `db:"prefix"`
	Scopes     string     `db:"scopes"`
	TTL        int64      `db:"ttl_seconds"`
	ExpiresAt  time.Time  `db:"expires_at"`
	LastUsedAt *time.Time `db:"last_used_at"`
	RevokedAt  *time.Time `db:"revoked_at"`
}

func readTokenRow(t *testing.T, db *sqlx.DB, id int64) tokenRow {
	t.Helper()
	var r tokenRow
	if err := db.Get(&r, `SELECT token_hash, prefix, scopes, ttl_seconds, expires_at, last_used_at, revoked_at
		FROM api_tokens WHERE id = ?`, id); err != nil {
		t.Fatalf("read token %d: %v", id, err)
	}
	return r
}

// near reports whether got is within a few seconds of want.
func near(got, want time.Time) bool {
	d := got.Sub(want)
	return d > -5*time.Second && d < 5*time.Second
}

func TestCreateTokenStoresOnlyItsHash(t *testing.T) {
	ctx := context.Background()
	s, db := newTokenStore(t)
	u := createUser(t, s, runtime.User{Name: "integrator"})
	plain, tok, err := s.CreateToken(ctx, u.ID, []string{" run:read", "run:decide", "run:read", ""}, 2*time.Hour)
	if err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	if !tokenForm.MatchString(plain) {
		t.Errorf("token = %q, want tst_ and 64 lowercase hex digits", plain)
	}
	sum := sha256.Sum256([]byte(plain))
	row := readTokenRow(t, db, tok.ID)
	if want := hex.EncodeToString(sum[:]); row.Hash != want {
		t.Errorf("stored hash = %q, want the SHA-256 of the token %q", row.Hash, want)
	}
	var withPlain int
	if err := db.Get(&withPlain, `SELECT COUNT(*) FROM api_tokens
		WHERE token_hash = ? OR scopes LIKE ? OR prefix = ?`, plain, "%"+plain[4:]+"%", plain); err != nil {
		t.Fatal(err)
	}
	if withPlain != 0 {
		t.Errorf("the token itself is stored in %d rows", withPlain)
	}
	if tok.Prefix != plain[:12] || row.Prefix != plain[:12] {
		t.Errorf("prefix = %q (row %q), want %q", tok.Prefix, row.Prefix, plain[:12])
	}
	if want := []string{"run:read", "run:decide"}; !slices.Equal(tok.Scopes, want) || row.Scopes != "run:read,run:decide" {
		t.Errorf("scopes = %q (row %q), want %q", tok.Scopes, row.Scopes, want)
	}
	if tok.UserID != u.ID || tok.UserName != "integrator" || tok.TTL != 2*time.Hour || row.TTL != 7200 {
		t.Errorf("token = %+v, want user %d integrator with a ttl of 2h", tok, u.ID)
	}
	if !near(tok.ExpiresAt, time.Now().Add(2*time.Hour)) || tok.LastUsedAt != nil || tok.RevokedAt != nil {
		t.Errorf("token = %+v, want it to expire in 2h, unused and not revoked", tok)
	}

	again, _, err := s.CreateToken(ctx, u.ID, []string{"run:read"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if again == plain {
		t.Error("two tokens are the same")
	}
}

func TestCreateTokenRefuses(t *testing.T) {
	ctx := context.Background()
	s, db := newTokenStore(t)
	u := createUser(t, s, runtime.User{Name: "integrator"})
	tests := []struct {
		name         string
		user         int64
		scopes       []string
		ttl          time.Duration
		wantNotFound bool
		wantMsg      string
	}{
		{"unknown scope", u.ID, []string{"run:read", "run:everything"}, time.Hour, false, `unknown scope "run:everything"`},
		{"no scopes", u.ID, nil, time.Hour, false, "at least one scope"},
		{"only blanks", u.ID, []string{" ", ""}, time.Hour, false, "at least one scope"},
		{"zero ttl", u.ID, []string{"run:read"}, 0, false, "lifetime"},
		{"negative ttl", u.ID, []string{"run:read"}, -time.Hour, false, "lifetime"},
		{"ttl too long", u.ID, []string{"run:read"}, 20 * 365 * 24 * time.Hour, false, "lifetime"},
		{"unknown user", u.ID + 100, []string{"run:read"}, time.Hour, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain, tok, err := s.CreateToken(ctx, tt.user, tt.scopes, tt.ttl)
			if err == nil {
				t.Fatalf("CreateToken = %q, %+v; want an error", plain, tok)
			}
			if got := errors.Is(err, runtime.ErrNotFound); got != tt.wantNotFound {
				t.Errorf("error %v: runtime.ErrNotFound = %v, want %v", err, got, tt.wantNotFound)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Errorf("error = %v, want it to say %q", err, tt.wantMsg)
			}
			if plain != "" || tok != nil {
				t.Errorf("CreateToken returned %q, %+v with its error", plain, tok)
			}
		})
	}
	var n int
	if err := db.Get(&n, `SELECT COUNT(*) FROM api_tokens`); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d tokens stored by refused creations", n)
	}
}

func TestAuthenticateSlidesTheExpiry(t *testing.T) {
	ctx := context.Background()
	s, db := newTokenStore(t)
	u := createUser(t, s, runtime.User{Name: "integrator", Grants: []string{"approve"}})
	plain, tok, err := s.CreateToken(ctx, u.ID, []string{"run:read", "run:start"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Nearly expired: a use gives it its hour again.
	if _, err := db.Exec(`UPDATE api_tokens SET expires_at = NOW(6) + INTERVAL 2 SECOND WHERE id = ?`, tok.ID); err != nil {
		t.Fatal(err)
	}
	got, scopes, err := s.Authenticate(ctx, plain)
	if err != nil {
		t.Fatalf("Authenticate: %v", err)
	}
	sameUser(t, got, u)
	if want := []string{"run:read", "run:start"}; !slices.Equal(scopes, want) {
		t.Errorf("scopes = %q, want %q", scopes, want)
	}
	row := readTokenRow(t, db, tok.ID)
	if !near(row.ExpiresAt, time.Now().Add(time.Hour)) {
		t.Errorf("expires_at = %v after a use, want about an hour from now", row.ExpiresAt)
	}
	if row.LastUsedAt == nil || !near(*row.LastUsedAt, time.Now()) {
		t.Errorf("last_used_at = %v after a use, want about now", row.LastUsedAt)
	}
}

// TestAuthenticateConcurrently: uses of one token at the same moment all
// pass, even when two land in one microsecond and the second slide changes
// nothing.
func TestAuthenticateConcurrently(t *testing.T) {
	ctx := context.Background()
	s, _ := newTokenStore(t)
	u := createUser(t, s, runtime.User{Name: "integrator"})
	plain, _, err := s.CreateToken(ctx, u.ID, []string{"run:read"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			if _, _, err := s.Authenticate(ctx, plain); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Authenticate: %v", err)
	}
}

func TestAuthenticateRefuses(t *testing.T) {
	ctx := context.Background()
	s, db := newTokenStore(t)
	u := createUser(t, s, runtime.User{Name: "integrator"})
	gone := createUser(t, s, runtime.User{Name: "gone"})
	mk := func(user int64) (string, int64) {
		t.Helper()
		plain, tok, err := s.CreateToken(ctx, user, []string{"run:read"}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return plain, tok.ID
	}
	valid, _ := mk(u.ID)
	expired, expiredID := mk(u.ID)
	if _, err := db.Exec(`UPDATE api_tokens SET expires_at = NOW(6) - INTERVAL 1 SECOND WHERE id = ?`, expiredID); err != nil {
		t.Fatal(err)
	}
	revoked, revokedID := mk(u.ID)
	if err := s.RevokeToken(ctx, revokedID); err != nil {
		t.Fatal(err)
	}
	orphan, _ := mk(gone.ID)
	if _, err := s.DeleteUser(ctx, runtime.UserDeletion{UserID: gone.ID}); err != nil {
		t.Fatal(err)
	}
	unknown := "tst_" + strings.Repeat("0", 64)

	tests := []struct{ name, token string }{
		{"empty", ""},
		{"no prefix", valid[4:]},
		{"other prefix", "tsx_" + valid[4:]},
		{"upper-case hex", "tst_" + strings.ToUpper(valid[4:])},
		{"too short", valid[:len(valid)-1]},
		{"too long", valid + "0"},
		{"with a scheme", "Bearer " + valid},
		{"not hex", "tst_" + strings.Repeat("g", 64)},
		{"unknown", unknown},
		{"expired", expired},
		{"revoked", revoked},
		{"of a deleted user", orphan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, scopes, err := s.Authenticate(ctx, tt.token)
			if !errors.Is(err, runtime.ErrTokenInvalid) {
				t.Errorf("Authenticate = %v, %v, %v; want ErrTokenInvalid", u, scopes, err)
			}
		})
	}
	// A refused use neither revives nor touches the token.
	for _, id := range []int64{expiredID, revokedID} {
		row := readTokenRow(t, db, id)
		if row.LastUsedAt != nil || row.ExpiresAt.After(time.Now().Add(2*time.Hour)) {
			t.Errorf("token %d after refused uses: %+v, want it unused and not slid", id, row)
		}
	}
	if row := readTokenRow(t, db, expiredID); row.ExpiresAt.After(time.Now()) {
		t.Errorf("expired token %d expires at %v after a refused use, want it still expired", expiredID, row.ExpiresAt)
	}
	if _, _, err := s.Authenticate(ctx, valid); err != nil {
		t.Errorf("the valid token: %v", err)
	}
}

func TestRevokeAndListTokens(t *testing.T) {
	ctx := context.Background()
	s, _ := newTokenStore(t)
	ada := createUser(t, s, runtime.User{Name: "ada"})
	bob := createUser(t, s, runtime.User{Name: "bob"})
	if got, err := s.ListTokens(ctx); err != nil || got == nil || len(got) != 0 {
		t.Errorf("ListTokens on no tokens = %v, %v; want an empty slice", got, err)
	}
	_, first, err := s.CreateToken(ctx, ada.ID, []string{"run:read"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	plain, second, err := s.CreateToken(ctx, bob.ID, []string{"run:start", "run:cancel"}, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, second.ID); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	if err := s.RevokeToken(ctx, second.ID); err != nil {
		t.Errorf("RevokeToken again: %v, want nil", err)
	}
	if err := s.RevokeToken(ctx, second.ID+100); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("RevokeToken of no token: %v, want runtime.ErrNotFound", err)
	}
	if _, _, err := s.Authenticate(ctx, plain); !errors.Is(err, runtime.ErrTokenInvalid) {
		t.Errorf("Authenticate after revoke: %v, want ErrTokenInvalid", err)
	}
	list, err := s.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != first.ID || list[1].ID != second.ID {
		t.Fatalf("ListTokens = %+v, want tokens %d and %d in order", list, first.ID, second.ID)
	}
	if l := list[0]; l.UserName != "ada" || !slices.Equal(l.Scopes, []string{"run:read"}) || l.RevokedAt != nil || l.Prefix != first.Prefix {
		t.Errorf("first token listed as %+v", l)
	}
	if l := list[1]; l.UserName != "bob" || !slices.Equal(l.Scopes, []string{"run:start", "run:cancel"}) ||
		l.RevokedAt == nil || !near(*l.RevokedAt, time.Now()) || l.TTL != 24*time.Hour {
		t.Errorf("second token listed as %+v, want bob's, revoked now", l)
	}
}

func TestDeleteUserDeletesTheirTokens(t *testing.T) {
	ctx := context.Background()
	s, db := newTokenStore(t)
	gone := createUser(t, s, runtime.User{Name: "gone"})
	kept := createUser(t, s, runtime.User{Name: "kept"})
	for _, u := range []*runtime.User{gone, gone, kept} {
		if _, _, err := s.CreateToken(ctx, u.ID, []string{"run:read"}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DeleteUser(ctx, runtime.UserDeletion{UserID: gone.ID}); err != nil {
		t.Fatal(err)
	}
	count := func(user int64) int {
		var n int
		if err := db.Get(&n, `SELECT COUNT(*) FROM api_tokens WHERE user_id = ?`, user); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(gone.ID); n != 0 {
		t.Errorf("%d tokens of the deleted user remain", n)
	}
	if n := count(kept.ID); n != 1 {
		t.Errorf("the other user has %d tokens, want 1", n)
	}
	// A failed delete deletes no token either.
	if _, err := s.DeleteUser(ctx, runtime.UserDeletion{UserID: gone.ID}); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("DeleteUser again: %v, want runtime.ErrNotFound", err)
	}
	if n := count(kept.ID); n != 1 {
		t.Errorf("the other user has %d tokens after a failed delete, want 1", n)
	}
}
