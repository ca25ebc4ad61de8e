-- +goose Up
CREATE TABLE demo_orders (
    id VARCHAR(32) NOT NULL PRIMARY KEY,
    customer VARCHAR(200) NOT NULL,
    amount_cents BIGINT NOT NULL,
    currency CHAR(3) NOT NULL DEFAULT 'EUR',
    created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE demo_orders;
