-- +goose Up
CREATE TABLE decisions (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    run_id BIGINT NOT NULL,
    turn_digest CHAR(64) NOT NULL,
    kind VARCHAR(16) NOT NULL,
    scope VARCHAR(16) NOT NULL DEFAULT 'once',
    reason TEXT NOT NULL,
    input LONGTEXT NULL COMMENT 'JSON answer of an input turn',
    decided_by BIGINT NOT NULL,
    decided_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    path VARCHAR(16) NOT NULL,
    executed_at DATETIME(6) NULL,
    outcome VARCHAR(64) NULL,
    UNIQUE KEY decisions_run_turn (run_id, turn_digest)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE decisions;
