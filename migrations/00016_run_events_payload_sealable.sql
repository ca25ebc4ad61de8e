-- +goose Up
-- Event payloads carry run content at the full and redacted privacy
-- levels, and a decision's reason at every level: sealed when a key is set.
ALTER TABLE run_events
    MODIFY payload LONGBLOB NOT NULL COMMENT 'JSON, after the privacy filter; sealed when a key is set';

-- +goose Down
-- Only for rows that were never sealed: sealed bytes are not text.
ALTER TABLE run_events
    MODIFY payload LONGTEXT NOT NULL COMMENT 'JSON, after the privacy filter';
