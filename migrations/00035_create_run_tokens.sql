-- +goose Up
-- The credentials runs present to the MCP servers with identity: forward.
-- One credential per run (the key): minting one, at the start of a
-- continuation or after a server refused the last, replaces the last. A
-- credential acts only while its run runs under the claim it was minted
-- for (claimed_by): the commit that pauses or settles the run, or a take
-- over by another holder, revokes it with no statement of its own. The
-- workers' sweep deletes the rows whose expires_at passed.
CREATE TABLE run_tokens (
    run_id BIGINT NOT NULL PRIMARY KEY,
    owner_id BIGINT NOT NULL,
    claimed_by VARCHAR(64) NOT NULL COMMENT 'the claim of the continuation it was minted for',
    token_hash CHAR(64) NOT NULL COMMENT 'hex SHA-256 of the credential; the credential itself is never stored',
    ttl_seconds BIGINT NOT NULL COMMENT 'each slide moves expires_at to now plus this',
    expires_at DATETIME(6) NOT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    UNIQUE KEY run_tokens_hash (token_hash),
    KEY run_tokens_owner (owner_id),
    KEY run_tokens_expires (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE run_tokens;
