-- +goose Up
-- The tools a waiting run's turn asks about, comma-separated: the inbox
-- filters by tool, and the turn itself is sealed when keys are set. Runs
-- that waited before keep NULL until they pause again.
ALTER TABLE runs ADD COLUMN pending_tools VARCHAR(1000) NULL COMMENT 'tool names of the pending turn, comma-separated' AFTER turn_digest;

-- +goose Down
ALTER TABLE runs DROP COLUMN pending_tools;
