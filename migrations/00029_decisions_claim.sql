-- +goose Up
-- A random number drawn by the claim that wrote the decision. On a Galera
-- cluster a process reads it back after its commit, through the reads that
-- wait for the whole cluster, and treats the claim as won only if the row
-- is its own: a commit the cluster did not keep must never continue a run.
-- NULL for decisions written before it existed or by an older process.
ALTER TABLE decisions ADD COLUMN claim BIGINT NULL;

-- +goose Down
ALTER TABLE decisions DROP COLUMN claim;
