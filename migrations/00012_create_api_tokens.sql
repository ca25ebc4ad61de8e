-- +goose Up
CREATE TABLE api_tokens (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    user_id BIGINT NOT NULL,
    token_hash CHAR(64) NOT NULL COMMENT 'hex SHA-256 of the token; the token itself is never stored',
    prefix CHAR(12) NOT NULL COMMENT 'the first characters of the token, to recognise it in lists',
    scopes VARCHAR(200) NOT NULL DEFAULT '' COMMENT 'comma-separated',
    ttl_seconds BIGINT NOT NULL COMMENT 'each use moves expires_at to now plus this',
    expires_at DATETIME(6) NOT NULL,
    last_used_at DATETIME(6) NULL,
    revoked_at DATETIME(6) NULL,
    created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    UNIQUE KEY api_tokens_hash (token_hash),
    KEY api_tokens_user (user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE api_tokens;
