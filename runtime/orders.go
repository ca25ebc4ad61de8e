package runtime

// Order is one of the demo's orders, which the built-in tools look up and
// refund (runtime/tool/builtin); the store keeps them in demo_orders.
type Order struct {
	ID          string
	Customer    string
	AmountCents int64
	Currency    string
}

// Refund is one refund of a demo order: which call of which run refunded
// how much of which order. Every execution of refund_order is one more.
type Refund struct {
	OrderID     string
	AmountCents int64
	RunID       int64
	CallID      string
}
