package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Order is one of the demo's orders, which the built-in tools look up and
// refund; the store keeps them in demo_orders.
type Order struct {
	ID          string
	Customer    string
	AmountCents int64
	Currency    string
	// Owner is the name of the user the order belongs to, "" for nobody:
	// the example internal MCP server shows people their own.
	Owner string
}

// Refund is one refund of a demo order: which call of which run refunded
// how much of which order. Every execution of refund_order is one more.
type Refund struct {
	OrderID     string
	AmountCents int64
	RunID       int64
	CallID      string
}

const lookupOrderParams = `{
  "type": "object",
  "properties": {
    "order_id": {"type": "string", "minLength": 1, "description": "The order's id, such as ORD-1001."}
  },
  "required": ["order_id"],
  "additionalProperties": false
}`

const refundOrderParams = `{
  "type": "object",
  "properties": {
    "order_id": {"type": "string", "minLength": 1, "description": "The order's id, such as ORD-1001."},
    "amount_cents": {"type": "integer", "minimum": 1, "description": "How much to refund, in cents. Defaults to the order's whole amount and may not exceed it."},
    "reason": {"type": "string", "maxLength": 500, "description": "Why the order is refunded."},
    "processing_seconds": {"type": "number", "minimum": 0, "maximum": 60, "description": "How long the payment provider takes before the refund is written (a demo of a slow write)."}
  },
  "required": ["order_id"],
  "additionalProperties": false
}`

// maxReasonLength is refund_order's limit on reason, in characters, as its
// schema states.
const maxReasonLength = 500

// orderResult is lookup_order's result.
type orderResult struct {
	OrderID     string `json:"order_id"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
	Currency    string `json:"currency"`
}

// refundResult is refund_order's result.
type refundResult struct {
	RefundID    int64  `json:"refund_id"`
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

// orderNotFound is the error the model sees for an unknown order; it wraps
// runtime.ErrNotFound for callers that test for it.
type orderNotFound struct{ id string }

func (e orderNotFound) Error() string { return fmt.Sprintf("order %s not found", e.id) }
func (e orderNotFound) Unwrap() error { return runtime.ErrNotFound }

// findOrder looks an order up for a tool: an unknown id is "order X not
// found", any other failure names the tool.
func findOrder(ctx context.Context, orders Orders, tool, id string) (Order, error) {
	o, err := orders.Order(ctx, id)
	if errors.Is(err, runtime.ErrNotFound) {
		return Order{}, orderNotFound{id: id}
	}
	if err != nil {
		return Order{}, fmt.Errorf("%s: look up order %s: %w", tool, id, err)
	}
	return o, nil
}

// LookupOrder is the lookup_order tool: it reads one order.
type LookupOrder struct{ orders Orders }

// NewLookupOrder returns lookup_order reading from orders.
func NewLookupOrder(orders Orders) *LookupOrder { return &LookupOrder{orders: orders} }

// Spec describes lookup_order: read-only, arguments {"order_id": string}.
func (t *LookupOrder) Spec() runtime.ToolSpec {
	return runtime.ToolSpec{
		Name:        NameLookupOrder,
		Description: "Look up an order by its id: customer, amount in cents and currency.",
		Parameters:  json.RawMessage(lookupOrderParams),
		Effect:      runtime.ReadOnly,
	}
}

// Call returns the order as JSON {"order_id","customer","amount_cents",
// "currency"}. Invalid arguments, an unknown order ("order X not found") and
// a failing database are errors.
func (t *LookupOrder) Call(ctx context.Context, inv runtime.Invocation) (string, error) {
	var args struct {
		OrderID string `json:"order_id"`
	}
	if err := decodeArgs(NameLookupOrder, inv.Arguments, &args); err != nil {
		return "", err
	}
	if args.OrderID == "" {
		return "", fmt.Errorf("%s: invalid arguments: order_id is required", NameLookupOrder)
	}
	o, err := findOrder(ctx, t.orders, NameLookupOrder, args.OrderID)
	if err != nil {
		return "", err
	}
	return resultJSON(orderResult{OrderID: o.ID, Customer: o.Customer, AmountCents: o.AmountCents, Currency: o.Currency})
}

// RefundOrder is the refund_order tool: it refunds (part of) an order by
// inserting one row into demo_refunds per execution. It deliberately does
// not de-duplicate, nor check earlier refunds of the same order: a repeated
// execution must show as a second row, because exactly-once is the engine's
// job, not the tool's.
type RefundOrder struct{ orders Orders }

// NewRefundOrder returns refund_order acting on orders.
func NewRefundOrder(orders Orders) *RefundOrder { return &RefundOrder{orders: orders} }

// Spec describes refund_order: a non-idempotent write, arguments
// {"order_id": string, "amount_cents": integer, "reason": string}.
func (t *RefundOrder) Spec() runtime.ToolSpec {
	return runtime.ToolSpec{
		Name:        NameRefundOrder,
		Description: "Refund an order, in whole or in part. Every call pays out once more.",
		Parameters:  json.RawMessage(refundOrderParams),
		Effect:      runtime.NonIdempotentWrite,
	}
}

// refund is a refund_order call read and checked: what it would pay out.
type refund struct {
	order      Order
	amount     int64
	reason     string
	processing time.Duration
}

// plan reads a call's arguments and looks its order up: amount_cents
// defaults to the order's whole amount and must lie between 1 and that
// amount. Invalid arguments, an unknown order and a failing database are
// errors.
func (t *RefundOrder) plan(ctx context.Context, arguments json.RawMessage) (refund, error) {
	var args struct {
		OrderID     string  `json:"order_id"`
		AmountCents integer `json:"amount_cents"`
		Reason      string  `json:"reason"`
		Processing  float64 `json:"processing_seconds"`
	}
	if err := decodeArgs(NameRefundOrder, arguments, &args); err != nil {
		return refund{}, err
	}
	if args.OrderID == "" {
		return refund{}, fmt.Errorf("%s: invalid arguments: order_id is required", NameRefundOrder)
	}
	if n := utf8.RuneCountInString(args.Reason); n > maxReasonLength {
		return refund{}, fmt.Errorf("%s: invalid arguments: reason may have at most %d characters, not %d", NameRefundOrder, maxReasonLength, n)
	}
	o, err := findOrder(ctx, t.orders, NameRefundOrder, args.OrderID)
	if err != nil {
		return refund{}, err
	}
	amount := o.AmountCents
	if args.AmountCents.set {
		amount = args.AmountCents.value
	}
	if amount < 1 || amount > o.AmountCents {
		return refund{}, fmt.Errorf("%s: invalid arguments: amount_cents must be between 1 and %d (the amount of order %s), not %d", NameRefundOrder, o.AmountCents, o.ID, amount)
	}
	if args.Processing < 0 || args.Processing > 60 {
		return refund{}, fmt.Errorf("%s: invalid arguments: processing_seconds must be between 0 and 60", NameRefundOrder)
	}
	return refund{order: o, amount: amount, reason: args.Reason,
		processing: time.Duration(args.Processing * float64(time.Second))}, nil
}

// Preview says what a call would pay out, to whom, without paying: "Refund
// 49.99 EUR of ORD-1001 to Ada Lovelace (customer request)". Its errors
// are Call's for the same arguments.
func (t *RefundOrder) Preview(ctx context.Context, inv runtime.Invocation) (string, error) {
	r, err := t.plan(ctx, inv.Arguments)
	if err != nil {
		return "", err
	}
	what := "Refund"
	if r.amount < r.order.AmountCents {
		what = "Refund part of the order:"
	}
	line := fmt.Sprintf("%s %s %s of %s to %s", what, money(r.amount), r.order.Currency, r.order.ID, r.order.Customer)
	if r.reason != "" {
		line += " (" + r.reason + ")"
	}
	return line, nil
}

// money writes cents as units with two decimals: 4999 is 49.99.
func money(cents int64) string {
	return fmt.Sprintf("%d.%02d", cents/100, cents%100)
}

// Call records one refund of the planned amount (see plan), then returns
// {"refund_id","order_id","amount_cents"}. Invalid arguments, an unknown
// order and a failing database are errors; only the last can leave it
// unknown whether the refund was recorded.
func (t *RefundOrder) Call(ctx context.Context, inv runtime.Invocation) (string, error) {
	r, err := t.plan(ctx, inv.Arguments)
	if err != nil {
		return "", err
	}
	// A slow payment provider: the write is in flight (the engine has
	// stamped pending_effect) but has not happened yet.
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-time.After(r.processing):
	}
	id, err := t.orders.InsertRefund(ctx, Refund{OrderID: r.order.ID, AmountCents: r.amount, RunID: inv.RunID, CallID: inv.CallID})
	if err != nil {
		return "", fmt.Errorf("%s: refund order %s: %w", NameRefundOrder, r.order.ID, err)
	}
	return resultJSON(refundResult{RefundID: id, OrderID: r.order.ID, AmountCents: r.amount})
}
