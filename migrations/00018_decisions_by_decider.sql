-- +goose Up
-- The run history lists the runs a person decided.
ALTER TABLE decisions ADD KEY decisions_decider (decided_by, run_id);

-- +goose Down
ALTER TABLE decisions DROP KEY decisions_decider;
