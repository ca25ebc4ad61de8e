-- +goose Up
-- A run is a conversation of turns: the first prompt is turn 1, and each
-- follow-up message starts the next. runs.turn counts the run's pauses (the
-- digest's turn); conversation_turn counts the person's messages. Every
-- event and transcript message names the turn it belongs to, so a reader
-- pages a conversation by turn and a turn's stream carries its number.
-- Rows written before (and by a process of the previous version during a
-- rolling upgrade, which sends no turn) are turn 1: runs took one prompt.
ALTER TABLE runs ADD COLUMN conversation_turn INT NOT NULL DEFAULT 1 AFTER turn;
ALTER TABLE run_events ADD COLUMN turn INT NOT NULL DEFAULT 1 AFTER seq;
ALTER TABLE run_messages
    ADD COLUMN turn INT NOT NULL DEFAULT 1 AFTER idx,
    ADD COLUMN created_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6);

-- +goose Down
ALTER TABLE run_messages DROP COLUMN created_at, DROP COLUMN turn;
ALTER TABLE run_events DROP COLUMN turn;
ALTER TABLE runs DROP COLUMN conversation_turn;
