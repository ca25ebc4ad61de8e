-- +goose Up
-- The rule of the configuration's policy that decided a turn (approve or
-- deny), its decided_by NULL: read back as the decider "policy:<name>".
-- NULL for a person's decision, an expiry's, and every decision an older
-- process writes, which never knows of rules.
ALTER TABLE decisions ADD COLUMN policy VARCHAR(64) NULL;

-- +goose Down
ALTER TABLE decisions DROP COLUMN policy;
