-- +goose Up
-- With state keys set the prompt and the answer are stored sealed
-- (AES-GCM, binary): text columns would refuse those bytes. Rows written
-- before keep their text, byte for byte.
ALTER TABLE runs
    MODIFY prompt MEDIUMBLOB NOT NULL COMMENT 'the prompt; sealed when a key is set',
    MODIFY answer MEDIUMBLOB NULL COMMENT 'the final answer; sealed when a key is set';

-- +goose Down
-- Only for rows that were never sealed: sealed bytes are not text.
ALTER TABLE runs
    MODIFY prompt TEXT NOT NULL,
    MODIFY answer MEDIUMTEXT NULL;
