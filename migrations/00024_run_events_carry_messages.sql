-- +goose Up
-- A step's new transcript messages travel in its event's row rather than
-- in run_messages rows of their own: one INSERT a step instead of two.
-- messages holds the step's sealed messages, each prefixed by its length
-- (uvarint); first_message is the transcript index of the first. The
-- transcript is run_messages (the messages a run started with, and those
-- of steps recorded before this migration) overlaid by each event's
-- messages in seq order, each starting at its first_message.
ALTER TABLE run_events
    ADD COLUMN first_message INT NULL COMMENT 'transcript index of the first of messages',
    ADD COLUMN messages LONGBLOB NULL COMMENT 'the step''s new transcript messages, each length-prefixed; sealed when a key is set';

-- +goose Down
-- Loses the transcript messages of every step recorded since the Up.
ALTER TABLE run_events DROP COLUMN messages, DROP COLUMN first_message;
