// Package examplemcp is an example of an internal MCP server that acts as
// the person who asked: Turnstile sends it a run credential (an MCP server
// entry with identity: forward), it asks Turnstile who that is (POST
// /api/identity/introspect, with a token of its own that has the scope
// identity:introspect), and its tools answer with that person's data
// only. A credential Turnstile no longer vouches for is answered 401, on
// which Turnstile mints a new one.
//
// It serves two read-only tools over streamable HTTP: my_orders, the
// caller's orders, and order_status, one order of the caller's ("no such
// order" for another person's, as for one that does not exist).
package examplemcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Identity is who a run credential acts for, as Turnstile's introspection
// says.
type Identity struct {
	Sub           string    // the user's name
	UserID        int64     // the user's id
	RunID         int64     // the run the credential belongs to
	Configuration string    // the run's agent
	Expires       time.Time // when the credential expires unless slid
}

// Introspector asks who a credential acts for; ErrInactive when nobody:
// revoked, expired, unknown or malformed.
type Introspector interface {
	Introspect(ctx context.Context, token string) (Identity, error)
}

// ErrInactive is an Introspector's answer for a credential that acts for
// nobody.
var ErrInactive = errors.New("examplemcp: the credential is not active")

// Order is one order as the server tells it.
type Order struct {
	ID          string
	Customer    string
	AmountCents int64
	Currency    string
}

// Orders reads the orders of one owner, by user name.
type Orders interface {
	OrdersOf(ctx context.Context, owner string) ([]Order, error)
}

// Handler returns the server's HTTP handler: every request must carry a
// credential in, its tools answer as its owner.
func Handler(in Introspector, orders Orders) http.Handler {
	srv := sdk.NewServer(&sdk.Implementation{Name: "orders", Version: "1"}, nil)
	sdk.AddTool(srv, &sdk.Tool{Name: "my_orders", Description: "Lists the orders of the person who asks.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			who, mine, err := callersOrders(ctx, req, orders)
			if err != nil {
				return nil, nil, err
			}
			return text(listing(who, mine)), nil, nil
		})
	type statusArgs struct {
		OrderID string `json:"order_id" jsonschema:"the order's id, e.g. ORD-1001"`
	}
	sdk.AddTool(srv, &sdk.Tool{Name: "order_status", Description: "Tells one order of the person who asks.",
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *sdk.CallToolRequest, in statusArgs) (*sdk.CallToolResult, any, error) {
			who, mine, err := callersOrders(ctx, req, orders)
			if err != nil {
				return nil, nil, err
			}
			for _, o := range mine {
				if o.ID == in.OrderID {
					return text(line(o)), nil, nil
				}
			}
			// Another person's order is told as one that does not exist.
			return nil, nil, fmt.Errorf("no such order among %s's: %s", who, in.OrderID)
		})
	mcp := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		id, err := in.Introspect(ctx, token)
		if errors.Is(err, ErrInactive) {
			return nil, fmt.Errorf("%w: Turnstile does not vouch for it", auth.ErrInvalidToken)
		}
		if err != nil {
			return nil, err
		}
		// UserID binds each MCP session to its person: the SDK refuses a
		// session's requests that come with another person's credential.
		return &auth.TokenInfo{UserID: strconv.FormatInt(id.UserID, 10), Expiration: id.Expires,
			Extra: map[string]any{"sub": id.Sub, "run_id": id.RunID}}, nil
	}
	return auth.RequireBearerToken(verify, nil)(mcp)
}

// callersOrders are the orders of the user the request's credential acts
// for, and that user's name.
func callersOrders(ctx context.Context, req *sdk.CallToolRequest, orders Orders) (string, []Order, error) {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return "", nil, errors.New("no credential")
	}
	sub, _ := req.Extra.TokenInfo.Extra["sub"].(string)
	if sub == "" {
		return "", nil, errors.New("the credential names nobody")
	}
	mine, err := orders.OrdersOf(ctx, sub)
	return sub, mine, err
}

// Direct introspects in the process, with the store's introspection, for
// a server that runs inside Turnstile's own tests; a real one asks over
// HTTP (Remote).
type Direct func(ctx context.Context, token string) (*runtime.RunIdentity, error)

// Introspect asks f; ErrInactive for runtime.ErrTokenInvalid.
func (f Direct) Introspect(ctx context.Context, token string) (Identity, error) {
	id, err := f(ctx, token)
	if errors.Is(err, runtime.ErrTokenInvalid) {
		return Identity{}, ErrInactive
	}
	if err != nil {
		return Identity{}, err
	}
	return Identity{Sub: id.User.Name, UserID: id.User.ID, RunID: id.RunID, Configuration: id.Configuration,
		Expires: id.ExpiresAt}, nil
}

func text(s string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
}

func listing(who string, orders []Order) string {
	if len(orders) == 0 {
		return who + " has no orders."
	}
	lines := []string{fmt.Sprintf("%s has %d orders:", who, len(orders))}
	for _, o := range orders {
		lines = append(lines, line(o))
	}
	return strings.Join(lines, "\n")
}

func line(o Order) string {
	return fmt.Sprintf("%s for %s: %d.%02d %s", o.ID, o.Customer, o.AmountCents/100, o.AmountCents%100, o.Currency)
}

// Remote introspects credentials at a Turnstile over HTTP.
type Remote struct {
	// URL is Turnstile's introspection endpoint,
	// "https://turnstile.example/api/identity/introspect".
	URL string
	// Token is the server's own API token, with the scope
	// identity:introspect.
	Token  string
	Client *http.Client // http.DefaultClient when nil
}

// Introspect asks Turnstile; ErrInactive when it answers active false, an
// error when it cannot be asked or refuses the server's own token.
func (r Remote) Introspect(ctx context.Context, token string) (Identity, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return Identity{}, fmt.Errorf("examplemcp: introspect: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+r.Token)
	c := r.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return Identity{}, fmt.Errorf("examplemcp: introspect: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Identity{}, fmt.Errorf("examplemcp: introspect: Turnstile answered HTTP %d (is the server's token valid, with the scope identity:introspect?)", resp.StatusCode)
	}
	var body struct {
		Active        bool   `json:"active"`
		Sub           string `json:"sub"`
		UserID        int64  `json:"user_id"`
		RunID         int64  `json:"run_id"`
		Configuration string `json:"configuration"`
		Exp           int64  `json:"exp"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return Identity{}, fmt.Errorf("examplemcp: introspect: %w", err)
	}
	if !body.Active {
		return Identity{}, ErrInactive
	}
	return Identity{Sub: body.Sub, UserID: body.UserID, RunID: body.RunID, Configuration: body.Configuration,
		Expires: time.Unix(body.Exp, 0)}, nil
}
