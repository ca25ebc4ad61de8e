package store

import (
	"cmp"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
)

var _ runtime.BulkStore = (*Store)(nil)

// claimChunk is how many claims one transaction carries: four round trips
// (begin, the locking read, the writes, the commit), a handful of
// statements and one log flush per chunk, however many runs it holds.
// Chunks of one bulk go to MySQL on claimLanes connections at once; they
// name disjoint runs, so they never wait for each other's locks.
const (
	claimChunk = 125
	claimLanes = 4
)

// RunsForDecision reads runs with their configurations in one round trip,
// for a bulk decision; see RunForDecision. Every id is in the answer: a
// missing run with runtime.ErrNotFound.
func (s *Store) RunsForDecision(ctx context.Context, ids []int64) (map[int64]runtime.RunForDecision, error) {
	out := make(map[int64]runtime.RunForDecision, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	q, args, err := sqlx.In(`
		SELECT r.*, c.active AS configuration_active, c.definition AS configuration_definition,
			u.id IS NULL AS owner_deleted
		FROM (SELECT `+runColumns+`, `+votesColumns+` FROM runs r WHERE r.id IN (?) AND `+notErased+`) AS r
		LEFT JOIN configurations c ON c.id = r.configuration_id
		LEFT JOIN users u ON u.id = r.owner_id`, ids)
	if err != nil {
		return nil, fmt.Errorf("store: read %d runs for decision: %w", len(ids), err)
	}
	var rows []struct {
		runtime.Run
		Active     *bool  `db:"configuration_active"`
		Definition []byte `db:"configuration_definition"`
	}
	if err := s.db.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, fmt.Errorf("store: read %d runs for decision: %w", len(ids), err)
	}
	runs := make([]*runtime.Run, len(rows))
	for i := range rows {
		runs[i] = &rows[i].Run
	}
	if err := readVotes(ctx, s.db, runs...); err != nil {
		return nil, err
	}
	// A bulk's runs mostly share a few configurations: each is decoded
	// once, and the runs share it, as they would share its row.
	cfgs := map[int64]*runtime.Configuration{}
	for i := range rows {
		row := &rows[i]
		r := runtime.RunForDecision{Run: &row.Run}
		if row.Active != nil {
			cfg, ok := cfgs[row.ConfigurationID]
			if !ok {
				cfg, err = s.configs.configuration(configurationRow{ID: row.ConfigurationID, Active: *row.Active, Definition: row.Definition})
				if err != nil {
					return nil, err
				}
				cfgs[row.ConfigurationID] = cfg
			}
			r.Configuration = cfg
		}
		out[row.ID] = r
	}
	for _, id := range ids {
		if _, ok := out[id]; !ok {
			out[id] = runtime.RunForDecision{Err: fmt.Errorf("store: run %d: %w", id, runtime.ErrNotFound)}
		}
	}
	return out, nil
}

// ClaimMany claims many runs as Claim claims one, in a few round trips
// and a few statements per chunk of claimChunk runs, one transaction each:
// a locking read of the chunk's rows through their primary key, in id
// order (two bulks, or a bulk and single claims, then queue on the same
// locks in the same order instead of deadlocking), which also tells which
// runs still wait on the turn their claim names; then one UPDATE of the
// winners, guarded once more by each run's own status and digest, one
// INSERT of their decisions and one of their standing approvals, and the
// commit only if the UPDATE changed exactly the winners. A chunk that
// fails as a whole (a unique-key clash on a decision, a deadlock, a Galera
// certification failure) is rolled back entirely and its claims are made
// again one at a time, so each ends exactly as Claim would end it. It
// returns one error per claim, in order: nil for a won claim,
// runtime.ErrClaimLost for a lost one.
func (s *Store) ClaimMany(ctx context.Context, claims []runtime.Claim) []error {
	errs := make([]error, len(claims))
	order := make([]int, len(claims))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(claims[a].RunID, claims[b].RunID) })
	var chunks [][]int
	for len(order) > 0 {
		n := min(claimChunk, len(order))
		chunks, order = append(chunks, order[:n]), order[n:]
	}
	lanes := make(chan struct{}, claimLanes)
	var wg sync.WaitGroup
	for _, chunk := range chunks {
		lanes <- struct{}{}
		wg.Go(func() {
			defer func() { <-lanes }()
			won, again, err := s.claimChunk(ctx, claims, chunk)
			if err != nil {
				// Nothing of the chunk was written: each claim on its own
				// says how it ends.
				for _, i := range chunk {
					errs[i] = s.claimOne(ctx, claims[i])
				}
				return
			}
			for _, i := range chunk {
				if !won[i] {
					errs[i] = fmt.Errorf("store: claim run %d: %w", claims[i].RunID, runtime.ErrClaimLost)
				}
			}
			// The cluster kept none of these and nobody else decided
			// their turns: each is made again on its own.
			for _, i := range again {
				errs[i] = s.claimOne(ctx, claims[i])
			}
		})
	}
	wg.Wait()
	return errs
}

// chunkTx begins a transaction of a few round trips (a chunk of claims or
// votes) on a connection of its own, with begin and its arguments; the
// caller closes the connection, after rollback unless it committed.
func (s *Store) chunkTx(ctx context.Context, begin string, args ...any) (*sqlx.Conn, func(), error) {
	conn, err := s.db.Connx(ctx)
	if err != nil {
		return nil, nil, err
	}
	rollback := func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn }) // never reuse it
		}
	}
	if _, err := conn.ExecContext(ctx, begin, args...); err != nil {
		rollback()
		conn.Close()
		return nil, nil, err
	}
	return conn, rollback, nil
}

// errChunkMoved: a chunk's UPDATE changed other rows than its locking
// read promised; it is rolled back and claimed one run at a time.
var errChunkMoved = errors.New("store: a bulk claim changed other rows than it locked")

// claimChunk claims the claims at the indexes of chunk (in run id order)
// in one transaction and returns which won, and which to make again on
// their own: those the cluster did not keep, where no other claim decided
// their turn (see claimsKept).
func (s *Store) claimChunk(ctx context.Context, claims []runtime.Claim, chunk []int) (won map[int]bool, again []int, err error) {
	conn, rollback, err := s.chunkTx(ctx, "START TRANSACTION")
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	ids := make([]any, len(chunk))
	for k, i := range chunk {
		ids[k] = claims[i].RunID
	}
	var rows []struct {
		ID     int64  `db:"id"`
		Status string `db:"status"`
		Digest string `db:"turn_digest"`
	}
	err = conn.SelectContext(ctx, &rows, `SELECT id, status, COALESCE(turn_digest, '') AS turn_digest
		FROM runs WHERE id IN (`+placeholders(len(ids))+`) ORDER BY id FOR UPDATE`, ids...)
	if err != nil {
		rollback()
		return nil, nil, err
	}
	now := make(map[int64]int, len(rows))
	for k, r := range rows {
		now[r.ID] = k
	}
	won = map[int]bool{}
	var winners []int
	for _, i := range chunk {
		c := claims[i]
		if k, ok := now[c.RunID]; ok && rows[k].Status == string(c.From) && rows[k].Digest == c.Digest {
			won[i] = true
			winners = append(winners, i)
		}
	}
	if len(winners) == 0 {
		rollback()
		return won, nil, nil
	}
	var sc script
	update := sc.add(claimUpdate(claims, winners))
	sc.args = claimUpdateArgs(claims, winners)
	var decisions, standing, credentials [][]any
	var changes []runChange
	marks := make([]claimMark, len(winners))
	for k, i := range winners {
		c, d := claims[i], claims[i].Decision
		marks[k] = claimMark{c.RunID, c.Digest, rand.Int64()}
		decisions = append(decisions, []any{c.RunID, c.Digest, d.Kind, d.Tools, d.Scope, []byte(d.Reason), nullJSON(d.Input),
			nullJSON(d.Arguments), nullDecider(d.DecidedBy), d.Path, marks[k].nonce})
		changes = append(changes, claimChange(c))
		for _, tool := range c.Standing {
			standing = append(standing, []any{c.RunID, tool, d.DecidedBy})
		}
		if m := c.Credential; m != nil {
			credentials = append(credentials, runTokenRow(c.RunID, m.OwnerID, c.ClaimedBy, m.Token, m.TTL))
		}
	}
	// The runs are locked and were seen waiting on these turns: each
	// decision goes in beside its run's UPDATE, which the commit below
	// waits on.
	inserted := sc.add(valuesInsert(`INSERT INTO decisions (run_id, turn_digest, kind, tools, scope, reason, input, arguments, decided_by, path, claim)`, decisions))
	if len(standing) > 0 {
		sc.add(valuesInsert("INSERT IGNORE INTO standing_approvals (run_id, tool_name, granted_by)", standing))
	}
	if len(credentials) > 0 {
		sc.add("INSERT INTO run_tokens (" + runTokenColumns + ") VALUES " +
			strings.TrimSuffix(strings.Repeat("("+runTokenValue+"), ", len(credentials)), ", ") + runTokenReplaces)
	}
	for _, row := range decisions {
		sc.args = append(sc.args, row...)
	}
	for _, row := range standing {
		sc.args = append(sc.args, row...)
	}
	for _, row := range credentials {
		sc.args = append(sc.args, row...)
	}
	// The commit below waits on the UPDATE's and the decisions' counts.
	sc.change("", changes...)
	res, err := sc.exec(ctx, conn.Conn)
	if err == nil && (res.affected(update) != int64(len(winners)) || res.affected(inserted) != int64(len(winners))) {
		err = errChunkMoved
	}
	if err != nil {
		rollback()
		return nil, nil, err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		rollback()
		return nil, nil, err
	}
	fates, err := s.claimsKept(ctx, marks)
	if err != nil {
		return nil, nil, err
	}
	for _, i := range winners {
		switch fates[claims[i].RunID] {
		case claimTaken:
			won[i] = false
		case claimVoid:
			won[i] = false
			again = append(again, i)
		}
	}
	return won, again, nil
}

// claimUpdate is one UPDATE of the runs that won their claims: each row
// takes its own claim's values, through a derived table of the claims,
// and is still guarded by its own status and digest. (One CASE per column
// and an OR of per-run guards instead measured 30–60 % slower.)
func claimUpdate(claims []runtime.Claim, winners []int) string {
	var q strings.Builder
	q.WriteString(`UPDATE runs r JOIN (`)
	for k := range winners {
		if k > 0 {
			q.WriteString(" UNION ALL ")
		}
		// The guard's strings carry the columns' collation explicitly: a
		// derived table's string column is as implicit as a table's, and
		// MySQL 8 refuses to compare two implicit collations that differ
		// (the connection's and utf8mb4_bin).
		q.WriteString("SELECT ? AS id, ? AS st, ? AS cb, ? AS us, CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin AS fr, CONVERT(? USING utf8mb4) COLLATE utf8mb4_bin AS dg")
	}
	q.WriteString(`) AS c ON c.id = r.id
		SET r.status = c.st, r.claimed_by = NULLIF(c.cb, ''),
			r.lease_expires_at = IF(c.cb = '', NULL, NOW(6) + INTERVAL c.us MICROSECOND),
			r.decided_at = NOW(6), r.waiting_since = NULL, r.decision_deadline = NULL, r.updated_at = NOW(6),
			r.approvals_required = NULL
		WHERE r.status = c.fr AND r.turn_digest = c.dg`)
	return q.String()
}

func claimUpdateArgs(claims []runtime.Claim, winners []int) []any {
	args := make([]any, 0, 6*len(winners))
	for _, i := range winners {
		c := claims[i]
		args = append(args, c.RunID, c.To, c.ClaimedBy, micros(c.Lease), c.From, c.Digest)
	}
	return args
}

// valuesInsert is an INSERT of rows as one VALUES list of placeholders.
func valuesInsert(insert string, rows [][]any) string {
	one := "(" + placeholders(len(rows[0])) + ")"
	return insert + " VALUES " + strings.TrimSuffix(strings.Repeat(one+", ", len(rows)), ", ")
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// nullDecider is a decider's id as the decisions table holds it: NULL for
// a decision by nobody (an expired pause).
func nullDecider(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}
