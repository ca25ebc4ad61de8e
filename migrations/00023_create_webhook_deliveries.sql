-- +goose Up
-- The outbox: one row per notification of one endpoint, written in the
-- same transaction as the step that causes it, delivered by the workers.
-- webhook_id is the Standard Webhooks message id, stable across retries.
-- body is the JSON body as sent; it is sealed when state keys are set
-- (at privacy level full it carries run content).
CREATE TABLE webhook_deliveries (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    webhook_id VARCHAR(64) NOT NULL,
    run_id BIGINT NOT NULL,
    configuration_id BIGINT NOT NULL,
    event VARCHAR(32) NOT NULL,
    url VARCHAR(2048) NOT NULL,
    secret_env VARCHAR(255) NOT NULL DEFAULT '',
    format VARCHAR(16) NOT NULL DEFAULT 'standard',
    body LONGBLOB NOT NULL,
    status VARCHAR(16) NOT NULL DEFAULT 'pending' COMMENT 'pending, delivered or failed',
    attempts INT NOT NULL DEFAULT 0,
    next_attempt_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    last_status INT NULL COMMENT 'HTTP status of the last attempt',
    last_error VARCHAR(1000) NULL,
    created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    delivered_at DATETIME(6) NULL,
    UNIQUE KEY webhook_deliveries_webhook_id (webhook_id),
    KEY webhook_deliveries_due (status, next_attempt_at),
    KEY webhook_deliveries_run (run_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE webhook_deliveries;
