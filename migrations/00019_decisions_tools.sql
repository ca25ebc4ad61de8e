-- +goose Up
-- The tools of the turn a decision decided, comma-separated, so that the
-- person who decided can be told afterwards what their decision did.
ALTER TABLE decisions ADD COLUMN tools VARCHAR(1000) NOT NULL DEFAULT '' COMMENT 'tool names of the decided turn, comma-separated' AFTER kind;

-- +goose Down
ALTER TABLE decisions DROP COLUMN tools;
