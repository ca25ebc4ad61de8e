package store

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/turnstile-dev/turnstile/runtime"
)

var _ runtime.VoteStore = (*Store)(nil)

// Vote records one vote on a turn that needs several, and claims the turn
// with it when the ballot carries the claim of the N-th, in one
// transaction in one round trip, like Claim. The run's row is locked
// first, so the votes on one run queue on that lock and each counts the
// votes before it exactly; the vote goes in only while the run waits on
// the digest and the turn has exactly b.Prior votes, so the count the
// caller answers and notified is the count it made. The N-th vote's claim
// is guarded by that count in the same transaction: it cannot win short of
// b.Required, whatever the caller believed.
//
// On a Galera cluster the row lock holds on one node only: two votes on
// two nodes at once both pass their guards there. Each of them writes the
// run's row (the claim's UPDATE, or updated_at), so certification fails
// one of them (a deadlock to the client), which runContended makes again:
// its guard then sees the other vote, or it fails certification again, and
// no vote counts without seeing the other. A vote whose COMMIT was answered
// OK is read back through the reads that wait for the cluster, as claims
// are (claimsKept); one the cluster did not keep is ErrClaimLost, and the
// caller reads the run again.
//
// runtime.ErrClaimLost when the run no longer waits on the digest or its
// turn has other votes than b.Prior; runtime.ErrAlreadyVoted when the
// user voted on the turn already (the votes' key); both with nothing
// written.
func (s *Store) Vote(ctx context.Context, b runtime.Ballot) error {
	nonce := rand.Int64()
	var sc script
	sc.add("START TRANSACTION")
	sc.add("SELECT id INTO @locked FROM runs WHERE id = ? FOR UPDATE", b.RunID)
	// A consistent read, whose snapshot is taken under the run's lock: every
	// vote on the run wrote the run's row, so each one committed before the
	// lock was granted is in it. (A locking read would take gap locks on
	// the votes' key, which voters on other runs then deadlock on.)
	sc.add("SELECT COUNT(*) INTO @prior FROM votes WHERE run_id = ? AND turn_digest = ?", b.RunID, b.Digest)
	var vote stmt
	if b.Claim != nil {
		// The claim first, its guard counting the votes with this one; the
		// vote then goes in only beside the decision the claim wrote, so
		// that a claim that did not win leaves no vote either.
		addClaim(&sc, *b.Claim, nonce, " AND @prior = ? AND @prior + 1 >= ?", b.Prior, b.Required)
		vote = sc.add(`INSERT INTO votes (run_id, turn_digest, user_id, voted_at)
			SELECT ?, ?, ?, NOW(6) FROM DUAL WHERE @prior = ?
				AND EXISTS (SELECT 1 FROM decisions WHERE run_id = ? AND turn_digest = ? AND claim = ?)`,
			b.RunID, b.Digest, b.UserID, b.Prior, b.RunID, b.Digest, nonce)
	} else {
		vote = sc.add(`INSERT INTO votes (run_id, turn_digest, user_id, voted_at)
			SELECT id, turn_digest, ?, NOW(6) FROM runs WHERE id = ? AND status = ? AND turn_digest = ? AND @prior = ?`,
			b.UserID, b.RunID, b.From, b.Digest, b.Prior)
		sc.add("SET @voted = ROW_COUNT()")
		// Every vote writes the run's row: on a cluster, two votes on two
		// nodes then conflict at certification (see above).
		sc.add("UPDATE runs SET updated_at = NOW(6) WHERE id = ? AND @voted = 1", b.RunID)
		addDeliveries(&sc, "@voted = 1", b.Notifications)
	}
	sc.add("COMMIT")
	res, err := sc.runContended(ctx, s.db)
	switch {
	case isDuplicate(err):
		return fmt.Errorf("store: vote on run %d: %w", b.RunID, runtime.ErrAlreadyVoted)
	case isContention(err):
		return fmt.Errorf("store: vote on run %d: %w", b.RunID, runtime.ErrClaimLost)
	case err != nil:
		return fmt.Errorf("store: vote on run %d: %w", b.RunID, err)
	case res.affected(vote) != 1:
		return fmt.Errorf("store: vote on run %d: %w", b.RunID, runtime.ErrClaimLost)
	}
	kept, err := s.voteKept(ctx, b, nonce)
	if err != nil {
		return fmt.Errorf("store: vote on run %d: %w", b.RunID, err)
	}
	if !kept {
		return fmt.Errorf("store: vote on run %d: %w", b.RunID, runtime.ErrClaimLost)
	}
	return nil
}

// voteKept says whether the cluster kept a vote whose COMMIT was answered
// OK: its claim's decision, or its row. A single server keeps every commit
// it acknowledged, and nothing is read.
func (s *Store) voteKept(ctx context.Context, b runtime.Ballot, nonce int64) (bool, error) {
	if s.synced == nil {
		return true, nil
	}
	if b.Claim != nil {
		fates, err := s.claimsKept(ctx, []claimMark{{b.RunID, b.Digest, nonce}})
		return fates[b.RunID] == claimKept, err
	}
	var n int
	err := s.synced.GetContext(ctx, &n, `SELECT COUNT(*) FROM votes WHERE run_id = ? AND turn_digest = ? AND user_id = ?`,
		b.RunID, b.Digest, b.UserID)
	if err != nil {
		return false, fmt.Errorf("read back vote: %w", err)
	}
	return n == 1, nil
}
