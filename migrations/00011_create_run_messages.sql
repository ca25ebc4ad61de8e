-- +goose Up
CREATE TABLE run_messages (
    run_id BIGINT NOT NULL,
    idx INT NOT NULL,
    body LONGBLOB NOT NULL COMMENT 'one transcript message as JSON; encrypted when a key is set',
    PRIMARY KEY (run_id, idx)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='append-only: a step writes only its new messages, never the whole transcript';

-- +goose Down
DROP TABLE run_messages;
