-- +goose Up
-- When a waiting run's pause expires (decision_timeout), on the database's
-- clock. Set only while a run waits on a turn that has a deadline, cleared
-- by the claim, a cancel or a settle: the workers find expired pauses by a
-- range on this index, which holds no other runs' deadlines, so finding
-- them never scans the waiting runs.
ALTER TABLE runs
    ADD COLUMN decision_deadline DATETIME(6) NULL COMMENT 'when the pending turn expires; NULL without a deadline' AFTER waiting_since,
    ADD KEY runs_decision_deadline (decision_deadline);

-- +goose Down
ALTER TABLE runs DROP KEY runs_decision_deadline, DROP COLUMN decision_deadline;
