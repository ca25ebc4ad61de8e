-- +goose Up
-- A decision's reason and input are run content: sealed when a key is set.
ALTER TABLE decisions
    MODIFY reason BLOB NOT NULL COMMENT 'the decider''s reason; sealed when a key is set',
    MODIFY input LONGBLOB NULL COMMENT 'JSON answer of an input turn; sealed when a key is set';

-- +goose Down
-- Only for rows that were never sealed: sealed bytes are not text.
ALTER TABLE decisions
    MODIFY reason TEXT NOT NULL,
    MODIFY input LONGTEXT NULL COMMENT 'JSON answer of an input turn';
