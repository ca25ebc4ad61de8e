-- +goose Up
-- The workers delete dead tokens in batches, oldest first: expired ones by
-- expires_at, revoked ones by revoked_at. Each batch's DELETE goes by its
-- key and locks only the rows it deletes, never a live token's.
ALTER TABLE api_tokens ADD KEY api_tokens_expires (expires_at), ADD KEY api_tokens_revoked (revoked_at);

-- +goose Down
ALTER TABLE api_tokens DROP KEY api_tokens_expires, DROP KEY api_tokens_revoked;
