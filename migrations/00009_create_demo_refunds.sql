-- +goose Up
CREATE TABLE demo_refunds (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    order_id VARCHAR(32) NOT NULL,
    amount_cents BIGINT NOT NULL,
    run_id BIGINT NOT NULL,
    call_id VARCHAR(100) NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    KEY demo_refunds_order (order_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin COMMENT='no unique key on purpose: exactly-once must come from the pipeline';

-- +goose Down
DROP TABLE demo_refunds;
