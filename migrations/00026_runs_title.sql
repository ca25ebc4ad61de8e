-- +goose Up
-- A run's title: the first line of its first prompt cut at 80 characters,
-- a title the provider wrote once (configuration title: generate), or one
-- its owner set. It is run content: sealed when state keys are set, and
-- emptied by an erase. NULL for runs of before titles, which readers cut
-- from the prompt as they read it. title_source says which it is, so that
-- a generated title never overwrites one a person set.
ALTER TABLE runs
    ADD COLUMN title BLOB NULL COMMENT 'encrypted when a key is set' AFTER prompt,
    ADD COLUMN title_source VARCHAR(16) NOT NULL DEFAULT 'cut' AFTER title;

-- +goose Down
ALTER TABLE runs DROP COLUMN title_source, DROP COLUMN title;
