package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
)

var _ runtime.BulkStore = (*Store)(nil)

// claimChunk is how many claims one script carries: one transaction, one
// round trip and one log flush per chunk. Chunks of one bulk go to MySQL
// on claimLanes connections at once; they name disjoint runs, so they
// never wait for each other's locks.
const (
	claimChunk = 100
	claimLanes = 2
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
		SELECT r.*, c.active AS configuration_active, c.definition AS configuration_definition
		FROM (SELECT `+runColumns+` FROM runs r WHERE r.id IN (?)) AS r
		LEFT JOIN configurations c ON c.id = r.configuration_id`, ids)
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
	// A bulk's runs mostly share a few configurations: each is decoded
	// once, and the runs share it, as they would share its row.
	cfgs := map[int64]*runtime.Configuration{}
	for i := range rows {
		row := &rows[i]
		r := runtime.RunForDecision{Run: &row.Run}
		if row.Active != nil {
			cfg, ok := cfgs[row.ConfigurationID]
			if !ok {
				cfg, err = configurationRow{ID: row.ConfigurationID, Active: *row.Active, Definition: row.Definition}.configuration()
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

// ClaimMany claims many runs as Claim claims one, in a few round trips: one
// script per chunk of claimChunk runs, one transaction each. The script
// first locks the chunk's rows through their primary key in id order (two
// bulks, or a bulk and single claims, then queue on the same locks in the
// same order instead of deadlocking), then runs each claim's guarded
// UPDATE, with its decision chained on it, exactly as Claim does; each
// UPDATE's own row count says whether that claim won. When a chunk's
// script fails as a whole (a unique-key clash on a decision, a deadlock, a
// Galera certification failure) it is rolled back entirely and its claims
// are made again one at a time, so each ends exactly as Claim would end it.
// It returns one error per claim, in order: nil for a won claim,
// runtime.ErrClaimLost for a lost one.
func (s *Store) ClaimMany(ctx context.Context, claims []runtime.Claim) []error {
	errs := make([]error, len(claims))
	order := make([]int, len(claims))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return compareID(claims[a].RunID, claims[b].RunID) })
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
			s.claimChunk(ctx, claims, chunk, errs)
		})
	}
	wg.Wait()
	return errs
}

func compareID(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// claimChunk claims the claims at the indexes of chunk (in run id order)
// in one script and sets their errors.
func (s *Store) claimChunk(ctx context.Context, claims []runtime.Claim, chunk []int, errs []error) {
	var sc script
	sc.add("START TRANSACTION")
	ids := make([]string, len(chunk))
	args := make([]any, len(chunk))
	for k, i := range chunk {
		ids[k], args[k] = "?", claims[i].RunID
	}
	sc.add("SELECT COUNT(*) INTO @locked FROM runs WHERE id IN ("+strings.Join(ids, ", ")+") ORDER BY id FOR UPDATE", args...)
	updates := make([]stmt, len(chunk))
	for k, i := range chunk {
		updates[k] = addClaim(&sc, claims[i])
	}
	sc.add("COMMIT")
	res, err := sc.run(ctx, s.db)
	if err != nil {
		// Nothing of the chunk was written: each claim on its own says
		// how it ends.
		for _, i := range chunk {
			errs[i] = s.Claim(ctx, claims[i])
		}
		return
	}
	for k, i := range chunk {
		if res.affected(updates[k]) != 1 {
			errs[i] = fmt.Errorf("store: claim run %d: %w", claims[i].RunID, runtime.ErrClaimLost)
		}
	}
}
