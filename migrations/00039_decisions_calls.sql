-- +goose Up
-- A turn decided call by call: each call's choice and reason, by call id
-- ({"<call id>":{"decision":"approve"|"deny","reason":"…"}}). The edited
-- arguments of approved calls stay in arguments, where an older process
-- reads them. Run content (the reasons): sealed when a key is set, hence
-- binary. NULL for a decision of the whole turn, and for every decision an
-- older process writes.
ALTER TABLE decisions ADD COLUMN calls LONGBLOB NULL COMMENT 'JSON object of per-call choices and reasons by call id; sealed when a key is set' AFTER arguments;

-- +goose Down
ALTER TABLE decisions DROP COLUMN calls;
