-- +goose Up
-- An approval may replace the arguments of pending calls (edit, then
-- approve): the replacements, by call id, belong to the decision, since the
-- turn digest still names the turn as it was offered. Run content: sealed
-- when a key is set, hence binary.
ALTER TABLE decisions ADD COLUMN arguments LONGBLOB NULL COMMENT 'JSON object of replacement arguments by call id; sealed when a key is set' AFTER input;

-- +goose Down
ALTER TABLE decisions DROP COLUMN arguments;
