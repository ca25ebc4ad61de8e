package store

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

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
// are (kept, votesKept); one the cluster did not keep is ErrClaimLost, and
// the caller reads the run again.
//
// runtime.ErrClaimLost when the run no longer waits on the digest or its
// turn has other votes than b.Prior; runtime.ErrAlreadyVoted when the
// user voted on the turn already (the votes' key); both with nothing
// written.
//
// Votes that claim nothing, made at the same time, go together (see
// groupCommit and voteMany).
func (s *Store) Vote(ctx context.Context, b runtime.Ballot) error {
	if b.Claim != nil {
		return s.voteOne(ctx, b)
	}
	return s.votes.make(b.RunID, b, voteChunk, s.voteBatch)
}

// voteChunk is how many votes one transaction of voteMany carries.
const voteChunk = 125

// voteBatch makes a batch of the vote queue: a vote on its own, or many
// together.
func (s *Store) voteBatch(batch []runtime.Ballot) []error {
	ctx := context.Background()
	if len(batch) == 1 {
		return []error{s.voteOne(ctx, batch[0])}
	}
	return s.voteMany(ctx, batch)
}

// voteOne is Vote's transaction for one ballot.
func (s *Store) voteOne(ctx context.Context, b runtime.Ballot) error {
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
		vote = addVote(&sc, b)
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
	return s.kept(ctx, b, nonce)
}

// addVote adds the statements of a vote that claims nothing, after its
// run's lock and @prior count: the vote's row, while the run waits on the
// digest with the count the voter saw, and its notifications.
func addVote(sc *script, b runtime.Ballot) stmt {
	vote := sc.add(`INSERT INTO votes (run_id, turn_digest, user_id, voted_at)
		SELECT id, turn_digest, ?, NOW(6) FROM runs WHERE id = ? AND status = ? AND turn_digest = ? AND @prior = ?`,
		b.UserID, b.RunID, b.From, b.Digest, b.Prior)
	sc.add("SET @voted = ROW_COUNT()")
	// Every vote writes the run's row: on a cluster, two votes on two
	// nodes then conflict at certification (see Vote).
	sc.add("UPDATE runs SET updated_at = NOW(6) WHERE id = ? AND @voted = 1", b.RunID)
	addDeliveries(sc, "@voted = 1", b.Notifications)
	sc.change("@voted = 1", voteChange(b))
	return vote
}

// voteChange is the feed's change-log row of a vote that claimed nothing:
// open inboxes show the new count without a reload.
func voteChange(b runtime.Ballot) runChange {
	return runChange{runID: b.RunID, change: runtime.ChangeVoted, status: b.From,
		decision: runtime.DecisionApprove, decidedBy: b.UserID}
}

// voteMany makes votes on different runs, none of which claims, together
// (voteChunk). A vote the chunk did not make (a second vote of one person,
// a count that moved, a run that moved on) and every vote of a chunk that
// failed as a whole are made again on their own (voteOne), which says
// exactly why.
func (s *Store) voteMany(ctx context.Context, batch []runtime.Ballot) []error {
	won, err := s.voteChunk(ctx, batch)
	var lost map[int]bool
	if err == nil {
		lost, err = s.votesKept(ctx, batch, won)
	}
	errs := make([]error, len(batch))
	for i, b := range batch {
		switch {
		case err != nil || !won[i]:
			errs[i] = s.voteOne(ctx, b)
		case lost[i]:
			errs[i] = fmt.Errorf("store: vote on run %d: %w", b.RunID, runtime.ErrClaimLost)
		}
	}
	return errs
}

// votesKept says which of a chunk's votes the cluster did not keep, by
// index, read back in one query through the reads that wait for it (as
// kept reads one). A single server keeps every commit it acknowledged,
// and nothing is read.
func (s *Store) votesKept(ctx context.Context, batch []runtime.Ballot, won []bool) (map[int]bool, error) {
	if s.synced == nil {
		return nil, nil
	}
	var ids []any
	for i, b := range batch {
		if won[i] {
			ids = append(ids, b.RunID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var rows []struct {
		RunID  int64  `db:"run_id"`
		Digest string `db:"turn_digest"`
		UserID int64  `db:"user_id"`
	}
	err := s.synced.SelectContext(ctx, &rows, `SELECT run_id, turn_digest, user_id FROM votes
		WHERE run_id IN (`+placeholders(len(ids))+`)`, ids...)
	if err != nil {
		return nil, fmt.Errorf("store: read back votes: %w", err)
	}
	type vote struct {
		run    int64
		digest string
		user   int64
	}
	there := make(map[vote]bool, len(rows))
	for _, r := range rows {
		there[vote{r.RunID, r.Digest, r.UserID}] = true
	}
	lost := map[int]bool{}
	for i, b := range batch {
		if won[i] && !there[vote{b.RunID, b.Digest, b.UserID}] {
			lost[i] = true
		}
	}
	return lost, nil
}

// voteChunk makes votes on different runs in one transaction of three
// round trips, as ClaimMany claims: the runs locked in id order (so that
// chunks, bulks and claims never wait on each other in a cycle), then
// their status, digest and count of votes read under those locks, then
// one multi-row INSERT of the votes whose guard holds, the runs' rows
// written, the notifications and the feed's changes, with the COMMIT. The
// transaction reads committed data: the count is then read once every lock is held, and
// every vote committed on those runs is in it (each wrote its run's row,
// so it committed before the lock was granted). Under repeatable read the
// snapshot of the first read could be older than a lock, and two voters
// would each count themselves first of two. It returns which votes it
// made, by index.
func (s *Store) voteChunk(ctx context.Context, batch []runtime.Ballot) ([]bool, error) {
	ids := make([]any, len(batch))
	for i, b := range batch {
		ids[i] = b.RunID
	}
	slices.SortFunc(ids, func(a, b any) int { return cmp.Compare(a.(int64), b.(int64)) })
	in := placeholders(len(ids))
	conn, rollback, err := s.chunkTx(ctx, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION; "+
		"SELECT id FROM runs WHERE id IN ("+in+") ORDER BY id FOR UPDATE", ids...)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	var rows []struct {
		ID     int64  `db:"id"`
		Status string `db:"status"`
		Digest string `db:"turn_digest"`
		Votes  int    `db:"votes"`
	}
	err = conn.SelectContext(ctx, &rows, `SELECT r.id, r.status, COALESCE(r.turn_digest, '') AS turn_digest,
		(SELECT COUNT(*) FROM votes v WHERE v.run_id = r.id AND v.turn_digest = r.turn_digest) AS votes
		FROM runs r WHERE r.id IN (`+in+`)`, ids...)
	if err != nil {
		rollback()
		return nil, err
	}
	now := make(map[int64]int, len(rows))
	for k, r := range rows {
		now[r.ID] = k
	}
	won := make([]bool, len(batch))
	var votes [][]any
	var runs []any
	var notes []runtime.Delivery
	var changes []runChange
	for i, b := range batch {
		k, ok := now[b.RunID]
		if !ok || rows[k].Status != string(b.From) || rows[k].Digest != b.Digest || rows[k].Votes != b.Prior {
			continue
		}
		won[i] = true
		votes = append(votes, []any{b.RunID, b.Digest, b.UserID})
		runs = append(runs, b.RunID)
		changes = append(changes, voteChange(b))
		notes = append(notes, b.Notifications...)
	}
	if len(votes) == 0 {
		rollback()
		return won, nil
	}
	var sc script
	sc.add(valuesInsert("INSERT INTO votes (run_id, turn_digest, user_id)", votes), flatten(votes)...)
	// Every vote writes its run's row: on a cluster, two votes on two
	// nodes then conflict at certification (see Vote).
	sc.add("UPDATE runs SET updated_at = NOW(6) WHERE id IN ("+placeholders(len(runs))+")", runs...)
	addDeliveries(&sc, "TRUE", notes)
	sc.change("", changes...)
	sc.add("COMMIT")
	// A second vote of one person (the votes' key) stops the script
	// before its COMMIT.
	if _, err := sc.exec(ctx, conn.Conn); err != nil {
		rollback()
		return nil, err
	}
	return won, nil
}

// kept says what the cluster kept of a vote whose COMMIT was answered OK:
// nil, or ErrClaimLost for one it did not keep (its claim's decision, or
// its row, missing from the reads that wait for the cluster). A single
// server keeps every commit it acknowledged, and nothing is read.
func (s *Store) kept(ctx context.Context, b runtime.Ballot, nonce int64) error {
	if s.synced == nil {
		return nil
	}
	ok := false
	if b.Claim != nil {
		fates, err := s.claimsKept(ctx, []claimMark{{b.RunID, b.Digest, nonce}})
		if err != nil {
			return fmt.Errorf("store: vote on run %d: %w", b.RunID, err)
		}
		ok = fates[b.RunID] == claimKept
	} else {
		var n int
		err := s.synced.GetContext(ctx, &n, `SELECT COUNT(*) FROM votes WHERE run_id = ? AND turn_digest = ? AND user_id = ?`,
			b.RunID, b.Digest, b.UserID)
		if err != nil {
			return fmt.Errorf("store: vote on run %d: read back: %w", b.RunID, err)
		}
		ok = n == 1
	}
	if !ok {
		return fmt.Errorf("store: vote on run %d: %w", b.RunID, runtime.ErrClaimLost)
	}
	return nil
}
