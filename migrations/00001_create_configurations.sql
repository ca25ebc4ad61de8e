-- +goose Up
CREATE TABLE configurations (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    identifier VARCHAR(100) NOT NULL,
    name VARCHAR(200) NOT NULL,
    active TINYINT(1) NOT NULL DEFAULT 1,
    provider VARCHAR(50) NOT NULL,
    model VARCHAR(200) NOT NULL DEFAULT '',
    system_prompt TEXT NOT NULL,
    max_iterations INT NOT NULL DEFAULT 5,
    require_second_approver TINYINT(1) NOT NULL DEFAULT 0,
    privacy_level VARCHAR(16) NOT NULL DEFAULT 'metadata',
    definition LONGTEXT NOT NULL COMMENT 'the whole configuration as JSON',
    created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    UNIQUE KEY configurations_identifier (identifier)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE configurations;
