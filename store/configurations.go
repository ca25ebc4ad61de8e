package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
)

// configurationRow is a stored configuration: the whole definition as JSON,
// beside the columns that queries filter on.
type configurationRow struct {
	ID         int64  `db:"id"`
	Active     bool   `db:"active"`
	Definition []byte `db:"definition"`
}

func (r configurationRow) configuration() (*runtime.Configuration, error) {
	var c runtime.Configuration
	if err := json.Unmarshal(r.Definition, &c); err != nil {
		return nil, fmt.Errorf("store: configuration %d: %w", r.ID, err)
	}
	c.ID, c.Active = r.ID, r.Active
	return &c, nil
}

// Configuration returns a configuration by id, or runtime.ErrNotFound.
func (s *Store) Configuration(ctx context.Context, id int64) (*runtime.Configuration, error) {
	var row configurationRow
	err := s.db.GetContext(ctx, &row, `SELECT id, active, definition FROM configurations WHERE id = ?`, id)
	if err != nil {
		return nil, notFound(fmt.Sprintf("configuration %d", id), err)
	}
	return row.configuration()
}

// ConfigurationByIdentifier returns a configuration, or runtime.ErrNotFound.
func (s *Store) ConfigurationByIdentifier(ctx context.Context, identifier string) (*runtime.Configuration, error) {
	var row configurationRow
	err := s.db.GetContext(ctx, &row, `
		SELECT id, active, definition FROM configurations WHERE identifier = ?`, identifier)
	if err != nil {
		return nil, notFound(fmt.Sprintf("configuration %q", identifier), err)
	}
	return row.configuration()
}

// Configurations lists every configuration by identifier.
func (s *Store) Configurations(ctx context.Context) ([]*runtime.Configuration, error) {
	var rows []configurationRow
	if err := s.db.SelectContext(ctx, &rows, `
		SELECT id, active, definition FROM configurations ORDER BY identifier`); err != nil {
		return nil, fmt.Errorf("store: configurations: %w", err)
	}
	out := make([]*runtime.Configuration, 0, len(rows))
	for _, r := range rows {
		c, err := r.configuration()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// SaveConfiguration creates a configuration or updates the one with the
// same identifier, and sets c.ID. c must be normalized.
func (s *Store) SaveConfiguration(ctx context.Context, c *runtime.Configuration) error {
	def, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("store: save configuration %q: %w", c.Identifier, err)
	}
	// VALUES() is deprecated on MySQL 8 but is the one upsert spelling
	// that MariaDB and MySQL both accept. version comes first: assignments
	// run left to right and see the ones before them, so it must compare
	// the old definition with the new, byte for byte (the table is
	// utf8mb4_bin; BINARY keeps it so under any collation).
	_, err = s.db.ExecContext(ctx, `
		INSERT INTO configurations (identifier, name, active, provider, model, system_prompt,
			max_iterations, require_second_approver, privacy_level, definition)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON DUPLICATE KEY UPDATE
			version = IF(BINARY definition = BINARY VALUES(definition), version, version + 1),
			name = VALUES(name), active = VALUES(active),
			provider = VALUES(provider), model = VALUES(model), system_prompt = VALUES(system_prompt),
			max_iterations = VALUES(max_iterations),
			require_second_approver = VALUES(require_second_approver),
			privacy_level = VALUES(privacy_level), definition = VALUES(definition),
			updated_at = NOW(6)`,
		c.Identifier, c.Name, c.Active, c.Provider.Type, c.Provider.Model, c.SystemPrompt,
		c.MaxIterations, c.RequireSecondApprover, c.PrivacyLevel, def)
	if err != nil {
		return fmt.Errorf("store: save configuration %q: %w", c.Identifier, err)
	}
	if err := s.db.GetContext(ctx, &c.ID, `SELECT id FROM configurations WHERE identifier = ?`, c.Identifier); err != nil {
		return fmt.Errorf("store: save configuration %q: %w", c.Identifier, err)
	}
	return nil
}

// SetConfigurationActive switches a configuration on or off.
func (s *Store) SetConfigurationActive(ctx context.Context, id int64, active bool) error {
	res, err := s.db.ExecContext(ctx, `UPDATE configurations SET active = ?, updated_at = NOW(6) WHERE id = ?`, active, id)
	if err := oneRow(res, err, runtime.ErrNotFound); err != nil {
		return fmt.Errorf("store: set configuration %d active: %w", id, err)
	}
	return nil
}
