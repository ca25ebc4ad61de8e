-- +goose Up
-- Erasing a settled run removes its content and keeps its row as the
-- audit: when it was erased and by whom. Every read of a run but the
-- history's skips rows with erased_at set, so an erased run answers as
-- one that does not exist.
ALTER TABLE runs
    ADD COLUMN erased_at DATETIME(6) NULL COMMENT 'when its content was erased; NULL while it has content' AFTER decision_deadline,
    ADD COLUMN erased_by BIGINT NULL COMMENT 'the user who erased it' AFTER erased_at;

-- +goose Down
ALTER TABLE runs DROP COLUMN erased_by, DROP COLUMN erased_at;
