-- +goose Up
-- The answer a model round is streaming, written while it streams so that
-- a reload or another reader sees the text so far. One row a run: the
-- round in flight. Its idx is the transcript index the round's message
-- takes once the round is recorded, so the row shows only while no
-- message holds that index yet (a later step makes it stale without
-- deleting it); the next round's text overwrites it.
CREATE TABLE run_partials (
    run_id BIGINT NOT NULL PRIMARY KEY,
    idx INT NOT NULL,
    turn INT NOT NULL,
    body LONGBLOB NOT NULL COMMENT 'the assistant message so far as JSON; encrypted when a key is set',
    updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE run_partials;
