-- +goose Up
-- Votes: a turn that needs N approvals (approvals_required) is claimed by
-- the N-th distinct approver; each approval before it is a row here, bound
-- to the turn digest it approved, one per person per turn (the key). A
-- new turn has a new digest, so the votes of an earlier one count no more;
-- their rows stay, for the history. IF NOT EXISTS: the file holds two
-- statements, and one that failed on the second is run again whole.
CREATE TABLE IF NOT EXISTS votes (
    run_id BIGINT NOT NULL,
    turn_digest CHAR(64) NOT NULL,
    user_id BIGINT NOT NULL,
    voted_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (run_id, turn_digest, user_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- runs.approvals_required is the N of the turn in turn_digest, written by
-- the step that suspends on it, NULL when one approval decides it; every
-- claim of this version clears it as it moves the run on. The CHECK is for
-- a rolling deploy: a process of the version before, which knows no votes,
-- would claim such a turn with one approval; its claim leaves the column
-- set and the run running or decided, which the CHECK refuses, so that
-- claim fails with nothing written. A cancel and a new conversation turn
-- clear turn_digest, after which the column no longer counts.
ALTER TABLE runs ADD COLUMN approvals_required SMALLINT NULL,
    ADD CONSTRAINT runs_votes_counted CHECK (approvals_required IS NULL OR turn_digest IS NULL
        OR status NOT IN ('running', 'decided'));

-- +goose Down
ALTER TABLE runs DROP CONSTRAINT runs_votes_counted, DROP COLUMN approvals_required;
DROP TABLE votes;
