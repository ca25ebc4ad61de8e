package store

import (
	"context"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
)

// agentRow is a configuration row with its version (migration 00028).
type agentRow struct {
	configurationRow
	Version int `db:"version"`
}

func (r agentRow) agent() (runtime.Agent, error) {
	c, err := r.configuration()
	if err != nil {
		return runtime.Agent{}, err
	}
	return runtime.Agent{Configuration: c, Version: r.Version}, nil
}

// ActiveAgents lists the active configurations, the ones a run may be
// started with, by identifier.
func (s *Store) ActiveAgents(ctx context.Context) ([]runtime.Agent, error) {
	var rows []agentRow
	if err := s.db.SelectContext(ctx, &rows, `
		SELECT id, active, definition, version FROM configurations WHERE active ORDER BY identifier`); err != nil {
		return nil, fmt.Errorf("store: active agents: %w", err)
	}
	out := make([]runtime.Agent, 0, len(rows))
	for _, r := range rows {
		a, err := r.agent()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Agent returns a configuration, active or not, with its version, or
// runtime.ErrNotFound.
func (s *Store) Agent(ctx context.Context, identifier string) (runtime.Agent, error) {
	var row agentRow
	err := s.db.GetContext(ctx, &row, `
		SELECT id, active, definition, version FROM configurations WHERE identifier = ?`, identifier)
	if err != nil {
		return runtime.Agent{}, notFound(fmt.Sprintf("configuration %q", identifier), err)
	}
	return row.agent()
}

// DeactivateAgent switches a configuration off, as SetConfigurationActive
// does, by identifier: runs already started go on, new ones are refused
// (runtime.CodeInactiveConfiguration). It returns runtime.ErrNotFound for
// an unknown identifier; switching off one that is off already is no
// error. Its version stays: the definition did not change.
func (s *Store) DeactivateAgent(ctx context.Context, identifier string) error {
	res, err := s.db.ExecContext(ctx, `
		UPDATE configurations SET active = FALSE, updated_at = NOW(6) WHERE identifier = ?`, identifier)
	if err != nil {
		return fmt.Errorf("store: deactivate agent %q: %w", identifier, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("store: deactivate agent %q: %w", identifier, err)
	} else if n == 1 {
		return nil
	}
	// Zero rows: unknown, or off already (with CLIENT_FOUND_ROWS unset,
	// MySQL counts changed rows only; updated_at changes every time, but
	// do not rely on it).
	if _, err := s.Agent(ctx, identifier); err != nil {
		return err
	}
	return nil
}
