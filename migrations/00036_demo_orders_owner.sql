-- +goose Up
-- The demo's orders belong to demo users (by name), so that the example
-- internal MCP server answers each person with their own orders only.
ALTER TABLE demo_orders ADD COLUMN owner VARCHAR(256) NULL, ADD KEY demo_orders_owner (owner);

-- +goose Down
ALTER TABLE demo_orders DROP KEY demo_orders_owner, DROP COLUMN owner;
