-- +goose Up
CREATE TABLE runs (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    configuration_id BIGINT NOT NULL,
    owner_id BIGINT NOT NULL,
    origin VARCHAR(16) NOT NULL DEFAULT 'interactive',
    status VARCHAR(32) NOT NULL,
    turn INT NOT NULL DEFAULT 0,
    turn_digest CHAR(64) NULL,
    state LONGBLOB NOT NULL COMMENT 'transcript and pending turn; encrypted when a key is set',
    claimed_by VARCHAR(64) NULL,
    lease_expires_at DATETIME(6) NULL,
    pending_effect VARCHAR(255) NULL COMMENT 'call id of a non-idempotent write in flight',
    cancel_requested TINYINT(1) NOT NULL DEFAULT 0,
    termination_reason VARCHAR(64) NULL,
    prompt TEXT NOT NULL,
    answer MEDIUMTEXT NULL,
    iterations INT NOT NULL DEFAULT 0,
    input_tokens INT NOT NULL DEFAULT 0,
    output_tokens INT NOT NULL DEFAULT 0,
    waiting_since DATETIME(6) NULL,
    decided_at DATETIME(6) NULL,
    created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    KEY runs_status_waiting (status, waiting_since),
    KEY runs_status_decided (status, decided_at),
    KEY runs_owner (owner_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE runs;
