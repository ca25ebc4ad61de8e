-- +goose Up
CREATE TABLE standing_approvals (
    run_id BIGINT NOT NULL,
    tool_name VARCHAR(200) NOT NULL,
    granted_by BIGINT NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (run_id, tool_name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE standing_approvals;
