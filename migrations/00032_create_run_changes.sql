-- +goose Up
-- The change log of the live feed (GET /api/feed): one row for every step
-- that changes what a run's card, page or history row shows — started,
-- waiting, decided, settled, erased — written in that step's own
-- transaction, so that no change is committed without its row. The feed
-- reads it by id; the workers delete rows older than a day (created_at).
-- status is the run's status as the step left it, decision and decided_by
-- the claim's kind and decider (NULL for a decision by nobody).
CREATE TABLE run_changes (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    run_id BIGINT NOT NULL,
    change_kind VARCHAR(16) NOT NULL,
    status VARCHAR(32) NOT NULL,
    decision VARCHAR(16) NULL,
    decided_by BIGINT NULL,
    created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    KEY run_changes_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE run_changes;
