package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Claim moves a waiting run on and records its decision in one
// transaction; claims made at the same time are made together (see
// groupCommit), each still guarded on its own. The turn digest is part of the guard, so a form rendered for
// an earlier turn can never claim a later one; the decisions table's unique
// key on (run_id, turn_digest) makes a second decision of one turn
// impossible even if the guard were wrong. runtime.ErrClaimLost when the
// guard or that key says someone else won.
func (s *Store) Claim(ctx context.Context, c runtime.Claim) error {
	if len(c.Notifications) > 0 {
		// An expiry's claim, with its outbox rows: rare, and on its own.
		return s.claimOne(ctx, c)
	}
	return s.claims.make(c.RunID, c, claimChunk, s.claimBatch)
}

// claimOne is a claim on its own. A claim whose commit the cluster did
// not keep while no other claim decided the turn (errClaimVoid) is made
// again: its guard decides afresh, and the decider is not refused a turn
// that still waits (up to contendedTries in all).
func (s *Store) claimOne(ctx context.Context, c runtime.Claim) error {
	err := s.claimOnce(ctx, c)
	for try := 1; errors.Is(err, errClaimVoid) && try < contendedTries; try++ {
		err = s.claimOnce(ctx, c)
	}
	if errors.Is(err, errClaimVoid) {
		return fmt.Errorf("store: claim run %d: %w", c.RunID, runtime.ErrClaimLost)
	}
	return err
}

// errClaimVoid: a claim's COMMIT was answered OK, but the cluster holds
// no decision of its turn at all — neither the claim's nor another's.
var errClaimVoid = errors.New("store: the cluster did not keep a committed claim")

// claimOnce is one try of claimOne.
func (s *Store) claimOnce(ctx context.Context, c runtime.Claim) error {
	// One transaction in one round trip, like a step's Commit: the claim
	// is on the path of every decision, before its first line. The row is
	// locked through its primary key before the guarded UPDATE: many
	// deciders racing for one run then queue on that one lock. Left to the
	// UPDATE alone, InnoDB also takes locks on the status indexes the
	// winner rewrites, and reports deadlocks among the racers. Every write
	// after the UPDATE is chained on the statement before it (ROW_COUNT()),
	// so it happens only if the UPDATE won.
	nonce := rand.Int64()
	var sc script
	sc.add("START TRANSACTION")
	sc.add("SELECT id INTO @locked FROM runs WHERE id = ? FOR UPDATE", c.RunID)
	update := addClaim(&sc, c, nonce, "")
	sc.add("COMMIT")
	// A claim that lost a lock race is tried again: it wins, or its guard
	// sees what the winner did and says the claim is lost, which the
	// pipeline classifies. One that loses every try (on a cluster, to a
	// winner whose commit this node has not applied yet) is lost as well:
	// the classification's read waits for that commit. Never a 500 for a
	// racer.
	res, err := sc.runContended(ctx, s.db)
	if isDuplicate(err) || isContention(err) {
		return fmt.Errorf("store: claim run %d: %w", c.RunID, runtime.ErrClaimLost)
	}
	if err != nil {
		return fmt.Errorf("store: claim run %d: %w", c.RunID, err)
	}
	if res.affected(update) != 1 {
		return fmt.Errorf("store: claim run %d: %w", c.RunID, runtime.ErrClaimLost)
	}
	fates, err := s.claimsKept(ctx, []claimMark{{c.RunID, c.Digest, nonce}})
	if err != nil {
		return fmt.Errorf("store: claim run %d: %w", c.RunID, err)
	}
	switch fates[c.RunID] {
	case claimTaken:
		return fmt.Errorf("store: claim run %d: %w", c.RunID, runtime.ErrClaimLost)
	case claimVoid:
		return fmt.Errorf("store: claim run %d: %w", c.RunID, errClaimVoid)
	}
	return nil
}

// addClaim adds a claim's statements to a script that locked its run: the
// guarded UPDATE, whose handle it returns, with guard (" AND …", and its
// arguments) added to its WHERE clause, and every write chained on it.
func addClaim(sc *script, c runtime.Claim, nonce int64, guard string, guardArgs ...any) stmt {
	d := c.Decision
	update := sc.add(`UPDATE runs SET status = ?, claimed_by = NULLIF(?, ''),
			lease_expires_at = IF(? = '', NULL, NOW(6) + INTERVAL ? MICROSECOND),
			decided_at = NOW(6), waiting_since = NULL, decision_deadline = NULL, updated_at = NOW(6),
			approvals_required = NULL
		WHERE id = ? AND status = ? AND turn_digest = ?`+guard,
		append([]any{c.To, c.ClaimedBy, c.ClaimedBy, micros(c.Lease), c.RunID, c.From, c.Digest}, guardArgs...)...)
	sc.add(`INSERT INTO decisions (run_id, turn_digest, kind, tools, scope, reason, input, arguments, calls, decided_by, path, claim)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, NULLIF(?, 0), ?, ? FROM DUAL WHERE ROW_COUNT() = 1`,
		c.RunID, c.Digest, d.Kind, d.Tools, d.Scope, []byte(d.Reason), nullJSON(d.Input), nullJSON(d.Arguments), nullJSON(d.Calls),
		d.DecidedBy, d.Path, nonce)
	// Chained on the decision's INSERT: one row exactly when it won, which
	// the statements after it chain on in turn.
	sc.change("ROW_COUNT() = 1", claimChange(c))
	// Chained on the decision's INSERT, which wrote its row only if the
	// UPDATE won. An expiry's claim also writes its notifications, and a
	// forwarding run's its credential, which then need the count kept:
	// one statement more, on those claims only.
	won := "ROW_COUNT() = 1"
	if len(c.Notifications) > 0 || c.Credential != nil {
		sc.add("SET @claimed = ROW_COUNT()")
		won = "@claimed = 1"
	}
	standing := make([][]any, len(c.Standing))
	for i, tool := range c.Standing {
		standing[i] = []any{c.RunID, tool, d.DecidedBy}
	}
	sc.guardedRows("INSERT IGNORE INTO standing_approvals (run_id, tool_name, granted_by)", won, standing)
	addDeliveries(sc, won, c.Notifications)
	addMint(sc, won, c.RunID, c.ClaimedBy, c.Credential)
	return update
}

// claimChange is the feed's change-log row of a claim that won.
func claimChange(c runtime.Claim) runChange {
	return runChange{runID: c.RunID, change: runtime.ChangeDecided, status: c.To,
		decision: c.Decision.Kind, decidedBy: c.Decision.DecidedBy}
}

// claimMark is what a claim wrote that no other claim writes: its run and
// turn, and the random number in its decision's claim column.
type claimMark struct {
	runID  int64
	digest string
	nonce  int64
}

// claimFate is what became of a claim whose COMMIT was answered OK.
type claimFate int

const (
	claimKept  claimFate = iota // the cluster holds its decision
	claimTaken                  // the turn's decision is another claim's
	claimVoid                   // the cluster holds no decision of the turn
)

// claimsKept says what the cluster kept of the claims that committed. A
// single server keeps every commit it acknowledged, and nothing is read.
// On a Galera cluster each claim's decision is read back through the
// reads that wait for every commit of the cluster: a claim whose decision
// is another's did not win, and one whose turn has no decision at all was
// not kept (its caller makes it again). The suite saw both under a storm
// of racers on two nodes — COMMIT answered OK, once for a whole bulk
// chunk, and the cluster without that commit; continuing such a claim
// would run the turn's tools under a lease the database does not grant.
func (s *Store) claimsKept(ctx context.Context, marks []claimMark) (map[int64]claimFate, error) {
	fates := make(map[int64]claimFate, len(marks))
	if s.synced == nil {
		return fates, nil // every claim kept
	}
	ids := make([]any, len(marks))
	for i, m := range marks {
		ids[i] = m.runID
	}
	var rows []struct {
		RunID  int64         `db:"run_id"`
		Digest string        `db:"turn_digest"`
		Claim  sql.NullInt64 `db:"claim"`
	}
	err := s.synced.SelectContext(ctx, &rows, `SELECT run_id, turn_digest, claim FROM decisions
		WHERE run_id IN (`+placeholders(len(ids))+`)`, ids...)
	if err != nil {
		return nil, fmt.Errorf("read back claimed decisions: %w", err)
	}
	mine := make(map[int64]claimMark, len(marks))
	for _, m := range marks {
		mine[m.runID] = m
		fates[m.runID] = claimVoid
	}
	for _, r := range rows {
		m := mine[r.RunID]
		if r.Digest != m.digest {
			continue
		}
		if r.Claim.Valid && r.Claim.Int64 == m.nonce {
			fates[r.RunID] = claimKept
		} else {
			fates[r.RunID] = claimTaken
		}
	}
	for _, m := range marks {
		if f := fates[m.runID]; f != claimKept {
			slog.Warn("a committed claim was not kept by the cluster", "run_id", m.runID, "another_claim_won", f == claimTaken)
		}
	}
	return fates, nil
}

// claimBatch makes a batch of the claim queue: a claim on its own, or
// many together (ClaimMany).
func (s *Store) claimBatch(batch []runtime.Claim) []error {
	ctx := context.Background()
	if len(batch) == 1 {
		return []error{s.claimOne(ctx, batch[0])}
	}
	return s.ClaimMany(ctx, batch)
}
