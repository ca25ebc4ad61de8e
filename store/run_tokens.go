package store

import (
	"context"
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
// inactive from then on (one row per run). Pausing or settling the run
// revokes it. The commits that start a continuation in a request mint
// its credential themselves (the claim of a decision, a start, a
// follow-up: runtime.CredentialMint): this is for a worker's continuation
// and a renewal after a 401.
// Errors are the database's.
func (s *Store) MintRunToken(ctx context.Context, runID, ownerID int64, claimedBy string, ttl time.Duration) (string, error) {
	m := &runtime.CredentialMint{Token: runtime.NewRunToken(), OwnerID: ownerID, TTL: ttl}
	q, args := mintStatement("", runID, claimedBy, m)
	if _, err := s.db.ExecContext(ctx, q, args...); err != nil {
		return "", fmt.Errorf("store: mint run token of run %d: %w", runID, err)
	}
	return m.Token, nil
}

// What a credential's row is written with, by MintRunToken and by the
// claims that mint one: a new credential replaces the run's last.
const (
	runTokenColumns = "run_id, owner_id, claimed_by, token_hash, ttl_seconds, expires_at"
	// runTokenValue is one row of runTokenColumns, for runTokenRow's
	// arguments.
	runTokenValue    = "?, ?, ?, ?, ?, NOW(6) + INTERVAL ? SECOND"
	runTokenReplaces = ` ON DUPLICATE KEY UPDATE owner_id = VALUES(owner_id), claimed_by = VALUES(claimed_by),
			token_hash = VALUES(token_hash), ttl_seconds = VALUES(ttl_seconds), expires_at = VALUES(expires_at),
			created_at = NOW(6)`
)

// runTokenRow is the arguments of one row of runTokenColumns, the expiry
// as seconds from now.
func runTokenRow(runID, ownerID int64, claimedBy, plain string, ttl time.Duration) []any {
	secs := int64(ttl / time.Second)
	return []any{runID, ownerID, claimedBy, hashRunToken(plain), secs, secs}
}

// addMint adds to a script the credential m of a run held by claimedBy
// (nothing when m is nil); see mintStatement.
func addMint(sc *script, guard string, runID int64, claimedBy string, m *runtime.CredentialMint) {
	if m != nil {
		q, args := mintStatement(guard, runID, claimedBy, m)
		sc.add(q, args...)
	}
}

// mintStatement writes the credential m of a run held by claimedBy, only
// while guard holds (the claim won), or always when guard is "" (a
// script that stops at its guard's failure before it gets here, or a
// statement of its own).
func mintStatement(guard string, runID int64, claimedBy string, m *runtime.CredentialMint) (string, []any) {
	q := `INSERT INTO run_tokens (` + runTokenColumns + `) VALUES (` + runTokenValue + `)`
	if guard != "" {
		q = `INSERT INTO run_tokens (` + runTokenColumns + `) SELECT ` + runTokenValue + ` FROM DUAL WHERE ` + guard
	}
	return q + runTokenReplaces, runTokenRow(runID, m.OwnerID, claimedBy, m.Token, m.TTL)
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
