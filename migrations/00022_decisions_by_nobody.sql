-- +goose Up
-- A pause that expires is decided by nobody: the worker records a denial
-- (or an escalation) with no decider.
ALTER TABLE decisions MODIFY decided_by BIGINT NULL;

-- +goose Down
-- Only when no decision by nobody was recorded.
ALTER TABLE decisions MODIFY decided_by BIGINT NOT NULL;
