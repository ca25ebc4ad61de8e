-- +goose Up
-- Every process that holds runs asks a few times a second which running
-- runs someone asked to cancel (the holder then stops the model or tool
-- call in flight). Those are few at any time; this index finds them
-- without reading the running runs that nobody cancelled.
ALTER TABLE runs ADD KEY runs_cancel_requested (status, cancel_requested);

-- +goose Down
ALTER TABLE runs DROP KEY runs_cancel_requested;
