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

var _ runtime.CredentialStore = (*Store)(nil)

// runTokenPrefix starts every run credential: "tsr_" and 64 hex digits.
const runTokenPrefix = "tsr_"

// hashRunToken is the stored form of a run credential. Whatever the
// string, well-formed or not, it is hashed and looked up alike: a
// malformed one then costs what an unknown one costs, and its answer
// comes as late (the stored hashes are all of well-formed credentials, so
// it never matches).
func hashRunToken(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(sum[:])
}

// MintRunToken makes a new credential for a run and its owner, valid for
// ttl while the run runs under the claim claimedBy, and returns it: the
// only time it is seen. It replaces the run's last credential, which is
// inactive from then on (one row per run). One statement, the only one a
// credential costs: pausing or settling the run revokes it. Errors are
// the database's.
func (s *Store) MintRunToken(ctx context.Context, runID, ownerID int64, claimedBy string, ttl time.Duration) (string, error) {
	b := make([]byte, 32)
	rand.Read(b)
	plain := runTokenPrefix + hex.EncodeToString(b)
	_, err := s.db.ExecContext(ctx, `
		INSERT INTO run_tokens (run_id, owner_id, claimed_by, token_hash, ttl_seconds, expires_at)
		VALUES (?, ?, ?, ?, ?, NOW(6) + INTERVAL ? SECOND)
		ON DUPLICATE KEY UPDATE owner_id = VALUES(owner_id), claimed_by = VALUES(claimed_by),
			token_hash = VALUES(token_hash), ttl_seconds = VALUES(ttl_seconds), expires_at = VALUES(expires_at),
			created_at = NOW(6)`,
		runID, ownerID, claimedBy, hashRunToken(plain), int64(ttl/time.Second), int64(ttl/time.Second))
	if err != nil {
		return "", fmt.Errorf("store: mint run token of run %d: %w", runID, err)
	}
	return plain, nil
}

// SlideRunTokens moves the expiry of the credentials of runs to their
// lifetime from now, in one statement per leaseBatch runs. A run without
// a credential is skipped.
func (s *Store) SlideRunTokens(ctx context.Context, runIDs []int64) error {
	for batch := range slices.Chunk(runIDs, leaseBatch) {
		args := make([]any, len(batch))
		for i, id := range batch {
			args[i] = id
		}
		if _, err := s.db.ExecContext(ctx, `UPDATE run_tokens SET expires_at = NOW(6) + INTERVAL ttl_seconds SECOND
			WHERE run_id IN (`+strings.Repeat("?, ", len(batch)-1)+`?) AND expires_at > NOW(6)`, args...); err != nil {
			return fmt.Errorf("store: slide %d run tokens: %w", len(batch), err)
		}
	}
	return nil
}

// IntrospectRunToken says who a run credential acts for. Revoked (its
// run no longer runs under the live claim it was minted for: paused,
// settled, taken over, or its holder stopped renewing the lease), expired, unknown and malformed credentials, and one whose
// owner is gone, are all runtime.ErrTokenInvalid, after the same one
// lookup by hash; other errors are the database's.
func (s *Store) IntrospectRunToken(ctx context.Context, plain string) (*runtime.RunIdentity, error) {
	var r struct {
		userRow
		RunID         int64     `db:"run_id"`
		Configuration string    `db:"configuration"`
		ExpiresAt     time.Time `db:"expires_at"`
	}
	hash := hashRunToken(plain)
	lookup := func(db *sqlx.DB) error {
		return db.GetContext(ctx, &r, `
			SELECT t.run_id, t.expires_at, c.identifier AS configuration,
				u.id, u.name, u.role, u.grants, u.password_hash, u.created_at
			FROM run_tokens t
			JOIN users u ON u.id = t.owner_id
			JOIN runs ru ON ru.id = t.run_id AND ru.owner_id = t.owner_id
				AND ru.status = 'running' AND ru.claimed_by = t.claimed_by AND ru.lease_expires_at > NOW(6)
			JOIN configurations c ON c.id = ru.configuration_id
			WHERE t.token_hash = ? AND t.expires_at > NOW(6)`, hash)
	}
	err := lookup(s.db)
	if errors.Is(err, sql.ErrNoRows) && s.synced != nil {
		// On a cluster the credential may have been minted a moment ago
		// through another node: a miss asks again, waiting for the
		// cluster's commits (see SyncReads). Every inactive credential
		// pays it alike, so the time still tells nothing of which it was.
		err = lookup(s.synced)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, runtime.ErrTokenInvalid
	}
	if err != nil {
		return nil, fmt.Errorf("store: introspect run token: %w", err)
	}
	u := r.user()
	return &runtime.RunIdentity{User: u, RunID: r.RunID, Configuration: r.Configuration, ExpiresAt: r.ExpiresAt}, nil
}

// DeleteExpiredRunTokens deletes up to limit run credentials whose expiry
// passed, the longest expired first, and reports how many it deleted.
func (s *Store) DeleteExpiredRunTokens(ctx context.Context, limit int) (int, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM run_tokens WHERE expires_at <= NOW(6) ORDER BY expires_at LIMIT ?`, limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete expired run tokens: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("store: delete expired run tokens: %w", err)
	}
	return int(n), nil
}
