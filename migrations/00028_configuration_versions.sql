-- +goose Up
-- A configuration's version counts its definitions: 1 when created, one
-- more each time config apply or PUT /api/agents/:identifier stores a
-- different one (the same file again keeps it). GET /api/agents shows it,
-- so a client sees which definition a run started after the answer gets.
ALTER TABLE configurations ADD COLUMN version INT UNSIGNED NOT NULL DEFAULT 1;

-- +goose Down
ALTER TABLE configurations DROP COLUMN version;
