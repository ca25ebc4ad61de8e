package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
)

// staleToken says a token's sliding expiry is due for a move: it was
// never used, or last used longer ago than 1% of its lifetime or a minute,
// whichever is shorter.
const staleToken = `(t.last_used_at IS NULL
	OR t.last_used_at < NOW(6) - INTERVAL LEAST(60000000, t.ttl_seconds * 10000) MICROSECOND)`

// Token lengths: "tst_" and 64 hex digits; the stored prefix is the first
// twelve characters of that.
const (
	tokenPrefix    = "tst_"
	tokenLength    = len(tokenPrefix) + 64
	tokenPrefixLen = 12 // api_tokens.prefix CHAR(12)
	maxScopesLen   = 200
	// Token lifetimes: at least a second, at most about ten years.
	minTokenTTL = time.Second
	maxTokenTTL = 10 * 365 * 24 * time.Hour
)

// Token is a bearer token as stored: never the token itself, only its
// hash and the first characters that identify it in a list.
type Token struct {
	ID       int64  `db:"id"`
	UserID   int64  `db:"user_id"`
	UserName string `db:"user_name"`
	// Prefix is the token's first twelve characters ("tst_" and 8 hex).
	Prefix string   `db:"prefix"`
	Scopes []string `db:"-"`
	// TTL is how long the token lives after its last use.
	TTL        time.Duration `db:"-"`
	ExpiresAt  time.Time     `db:"expires_at"`
	LastUsedAt *time.Time    `db:"last_used_at"`
	RevokedAt  *time.Time    `db:"revoked_at"`
	CreatedAt  time.Time     `db:"created_at"`
}

// tokenRow is one row of api_tokens with its user's name.
type tokenRow struct {
	Token
	ScopesCSV  string `db:"scopes"`
	TTLSeconds int64  `db:"ttl_seconds"`
}

func (r tokenRow) token() *Token {
	t := r.Token
	t.Scopes = splitGrants(r.ScopesCSV)
	t.TTL = time.Duration(r.TTLSeconds) * time.Second
	return &t
}

const tokenColumns = `t.id, t.user_id, COALESCE(u.name, '') AS user_name, t.prefix, t.scopes,
	t.ttl_seconds, t.expires_at, t.last_used_at, t.revoked_at, t.created_at`

// normalizeScopes trims the scopes, drops empty and repeated ones, and
// rejects unknown ones and an empty list.
func normalizeScopes(scopes []string) ([]string, error) {
	var out []string
	for _, sc := range scopes {
		sc = strings.TrimSpace(sc)
		if sc == "" || slices.Contains(out, sc) {
			continue
		}
		if !slices.Contains(runtime.AllScopes(), sc) {
			return nil, fmt.Errorf("unknown scope %q (known: %s)", sc, strings.Join(runtime.AllScopes(), ", "))
		}
		out = append(out, sc)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("a token needs at least one scope (%s)", strings.Join(runtime.AllScopes(), ", "))
	}
	if n := len(strings.Join(out, ",")); n > maxScopesLen {
		return nil, fmt.Errorf("scopes take %d bytes, more than %d", n, maxScopesLen)
	}
	return out, nil
}

// hashToken returns the stored form of a token, or false when the token
// does not have the form CreateToken gives: "tst_" and 64 lowercase hex
// digits.
func hashToken(plain string) (string, bool) {
	hexPart, ok := strings.CutPrefix(plain, tokenPrefix)
	if !ok || len(plain) != tokenLength {
		return "", false
	}
	for _, c := range hexPart {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	sum := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(sum[:]), true
}

// CreateToken makes a bearer token for a user with the given scopes and
// lifetime, and returns it — the only time it is ever seen: only its
// SHA-256 is stored. Each use moves its expiry to ttl after that use.
// Unknown or no scopes and a ttl under a second or over ten years are
// errors; a user that does not exist is an error wrapping runtime.ErrNotFound.
func (s *Store) CreateToken(ctx context.Context, userID int64, scopes []string, ttl time.Duration) (string, *Token, error) {
	scopes, err := normalizeScopes(scopes)
	if err != nil {
		return "", nil, fmt.Errorf("store: create token: %w", err)
	}
	if ttl < minTokenTTL || ttl > maxTokenTTL {
		return "", nil, fmt.Errorf("store: create token: the lifetime must be between %s and %s, not %s", minTokenTTL, maxTokenTTL, ttl)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", nil, fmt.Errorf("store: create token: %w", err)
	}
	plain := tokenPrefix + hex.EncodeToString(b)
	hash, _ := hashToken(plain)
	seconds := int64(ttl / time.Second)
	// INSERT … SELECT locks the user's row, so a token never outlives a
	// user deleted at the same moment.
	res, err := s.db.ExecContext(ctx, `
		INSERT INTO api_tokens (user_id, token_hash, prefix, scopes, ttl_seconds, expires_at)
		SELECT id, ?, ?, ?, ?, NOW(6) + INTERVAL ? SECOND FROM users WHERE id = ?`,
		hash, plain[:tokenPrefixLen], strings.Join(scopes, ","), seconds, seconds, userID)
	if err := oneRow(res, err, runtime.ErrNotFound); err != nil {
		return "", nil, fmt.Errorf("store: create token for user %d: %w", userID, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return "", nil, fmt.Errorf("store: create token for user %d: %w", userID, err)
	}
	t, err := s.Token(ctx, id)
	if err != nil {
		return "", nil, err
	}
	return plain, t, nil
}

// Token returns a token by id, or an error wrapping runtime.ErrNotFound.
func (s *Store) Token(ctx context.Context, id int64) (*Token, error) {
	var r tokenRow
	err := s.db.GetContext(ctx, &r, `SELECT `+tokenColumns+`
		FROM api_tokens t LEFT JOIN users u ON u.id = t.user_id WHERE t.id = ?`, id)
	if err != nil {
		return nil, notFound(fmt.Sprintf("token %d", id), err)
	}
	return r.token(), nil
}

// Authenticate returns the user a bearer token belongs to and the token's
// scopes, and slides the token's expiry: each use keeps it alive for its
// lifetime again, to within 1% of it or a minute (see staleToken). A malformed, unknown, expired or revoked token, or one
// whose user is gone, is runtime.ErrTokenInvalid; other errors are the database's.
func (s *Store) Authenticate(ctx context.Context, plain string) (*runtime.User, []string, error) {
	hash, ok := hashToken(plain)
	if !ok {
		return nil, nil, runtime.ErrTokenInvalid
	}
	// The lookup is by the hash, so comparing it takes no care of timing:
	// a guess tells nothing about how close it came.
	var r struct {
		userRow
		Scopes string `db:"token_scopes"`
		Stale  bool   `db:"stale"`
	}
	lookup := func(db *sqlx.DB) error {
		return db.GetContext(ctx, &r, `
			SELECT t.scopes AS token_scopes, `+staleToken+` AS stale,
				u.id, u.name, u.role, u.grants, u.password_hash, u.created_at
			FROM api_tokens t JOIN users u ON u.id = t.user_id
			WHERE t.token_hash = ? AND t.revoked_at IS NULL AND t.expires_at > NOW(6)`, hash)
	}
	err := lookup(s.db)
	if errors.Is(err, sql.ErrNoRows) && s.synced != nil {
		// On a cluster a token made a moment ago through another node
		// may not have reached this one: a miss asks again, waiting for
		// the cluster's commits (see SyncReads). Only misses pay for it.
		err = lookup(s.synced)
	}
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, nil, runtime.ErrTokenInvalid
		}
		return nil, nil, fmt.Errorf("store: authenticate: %w", err)
	}
	// Sliding the expiry is a write to the token's one row: done on every
	// use, the concurrent requests of one integrator queue on that row's
	// lock and each pays a commit. It is due only when it would move the
	// expiry by more than 1% of the lifetime (at most a minute); the
	// guard repeats the condition, so of many uses at once one writes.
	if r.Stale {
		if _, err := s.db.ExecContext(ctx, `
			UPDATE api_tokens t SET t.expires_at = NOW(6) + INTERVAL t.ttl_seconds SECOND, t.last_used_at = NOW(6)
			WHERE t.token_hash = ? AND t.revoked_at IS NULL AND t.expires_at > NOW(6) AND `+staleToken, hash); err != nil {
			return nil, nil, fmt.Errorf("store: authenticate: %w", err)
		}
	}
	u := r.user()
	return &u, splitGrants(r.Scopes), nil
}

// RevokeToken revokes a token for good; revoking a revoked token again
// changes nothing and is no error. A token that does not exist is an error
// wrapping runtime.ErrNotFound.
func (s *Store) RevokeToken(ctx context.Context, id int64) error {
	res, err := s.db.ExecContext(ctx, `UPDATE api_tokens SET revoked_at = NOW(6) WHERE id = ? AND revoked_at IS NULL`, id)
	if err := oneRow(res, err, runtime.ErrNotFound); err == nil {
		return nil
	} else if !errors.Is(err, runtime.ErrNotFound) {
		return fmt.Errorf("store: revoke token %d: %w", id, err)
	}
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT COUNT(*) FROM api_tokens WHERE id = ?`, id); err != nil {
		return fmt.Errorf("store: revoke token %d: %w", id, err)
	}
	if n == 0 {
		return fmt.Errorf("store: revoke token %d: %w", id, runtime.ErrNotFound)
	}
	return nil
}

// ListTokens returns every token, revoked and expired ones included (until
// the workers delete them), with its user's name, oldest first; an empty
// slice when there are none.
func (s *Store) ListTokens(ctx context.Context) ([]*Token, error) {
	var rows []tokenRow
	err := s.db.SelectContext(ctx, &rows, `SELECT `+tokenColumns+`
		FROM api_tokens t LEFT JOIN users u ON u.id = t.user_id ORDER BY t.id`)
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	out := make([]*Token, len(rows))
	for i, r := range rows {
		out[i] = r.token()
	}
	return out, nil
}
