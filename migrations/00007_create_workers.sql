-- +goose Up
CREATE TABLE workers (
    id VARCHAR(64) NOT NULL PRIMARY KEY,
    host VARCHAR(255) NOT NULL,
    pid INT NOT NULL,
    started_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    seen_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    KEY workers_seen (seen_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE workers;
