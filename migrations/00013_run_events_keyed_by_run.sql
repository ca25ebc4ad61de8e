-- +goose Up
-- Events are only ever found by (run_id, seq): as the primary key it is
-- the one index an append writes, where the surrogate id made two.
ALTER TABLE run_events
    DROP PRIMARY KEY,
    DROP COLUMN id,
    DROP INDEX run_events_run_seq,
    ADD PRIMARY KEY (run_id, seq);

-- +goose Down
ALTER TABLE run_events
    DROP PRIMARY KEY,
    ADD COLUMN id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST,
    ADD UNIQUE KEY run_events_run_seq (run_id, seq);
