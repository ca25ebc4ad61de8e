package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp/examplemcp"
	"github.com/turnstile-dev/turnstile/store"
)

// exampleTokenVar holds the example orders server's own API token, with
// the scope identity:introspect: read from the environment only.
const exampleTokenVar = "TURNSTILE_EXAMPLEMCP_TOKEN"

// demoOrdersVar is the variable the demo's orders-agent reaches the
// example orders server by; serve --demo sets it for its own MCP source.
const demoOrdersVar = "DEMO_ORDERS_URL"

// demoOrders adapts the demo orders table to the example server.
type demoOrderBook struct{ st *store.Store }

func (b demoOrderBook) OrdersOf(ctx context.Context, owner string) ([]examplemcp.Order, error) {
	orders, err := b.st.DemoOrdersOf(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := make([]examplemcp.Order, len(orders))
	for i, o := range orders {
		out[i] = examplemcp.Order{ID: o.ID, Customer: o.Customer, AmountCents: o.AmountCents, Currency: o.Currency}
	}
	return out, nil
}

// exampleMCP serves the example internal MCP server: the demo orders of
// whoever the run credential it is sent acts for, as Turnstile's
// introspection says.
func exampleMCP(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("examplemcp", e)
	var d dbFlags
	d.register(fs)
	addr := fs.String("addr", "127.0.0.1:8091", "address to listen on")
	introspect := fs.String("introspect-url", "http://127.0.0.1:8080/api/identity/introspect",
		"Turnstile's introspection endpoint; the server's own token, with the scope identity:introspect, is read from "+exampleTokenVar)
	if err := fs.parse(args); err != nil {
		return err
	}
	tok := strings.TrimSpace(e.getenv(exampleTokenVar))
	if tok == "" {
		return fmt.Errorf("examplemcp: set %s to a token with the scope %s (turnstile token create --user admin --scopes %s)",
			exampleTokenVar, runtime.ScopeIdentityIntrospect, runtime.ScopeIdentityIntrospect)
	}
	a, err := openLogged(ctx, d, e, "info")
	if err != nil {
		return err
	}
	defer a.close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := exampleServer(examplemcp.Remote{URL: *introspect, Token: tok}, a.store, a.log)
	a.log.Info("example orders server serving", "addr", ln.Addr().String(), "introspect_url", *introspect)
	return serveUntil(ctx, srv, ln)
}

// exampleServer is the example orders server's HTTP server.
func exampleServer(in examplemcp.Introspector, st *store.Store, log *slog.Logger) *http.Server {
	return &http.Server{Handler: examplemcp.Handler(in, demoOrderBook{st}), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// serveUntil serves on ln until ctx ends, then shuts down within 5s.
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener) error {
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// demoOrdersServer is the example orders server that serve --demo runs
// beside itself on a loopback port: its listener, open before the
// engine's MCP source is made (which reads demoOrdersVar), and its start
// once the store and Turnstile's own address are known.
type demoOrdersServer struct {
	ln net.Listener
}

func listenDemoOrders() (*demoOrdersServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo orders server: %w", err)
	}
	return &demoOrdersServer{ln: ln}, nil
}

// url is where the demo's orders-agent reaches it.
func (s *demoOrdersServer) url() string { return "http://" + s.ln.Addr().String() + "/mcp" }

// getenv answers demoOrdersVar with the server's URL, and the rest as
// getenv does.
func (s *demoOrdersServer) getenv(getenv func(string) string) func(string) string {
	return func(name string) string {
		if name == demoOrdersVar {
			return s.url()
		}
		return getenv(name)
	}
}

// start serves the example orders server until ctx ends, introspecting
// at self (Turnstile's own base URL) with a fresh token of the demo's
// admin.
func (s *demoOrdersServer) start(ctx context.Context, a *app, self string) error {
	admin, err := a.store.UserByName(ctx, "admin")
	if err != nil {
		return fmt.Errorf("demo orders server: %w", err)
	}
	tok, _, err := a.store.CreateToken(ctx, admin.ID, []string{runtime.ScopeIdentityIntrospect}, 24*time.Hour)
	if err != nil {
		return fmt.Errorf("demo orders server: %w", err)
	}
	in := examplemcp.Remote{URL: strings.TrimRight(self, "/") + "/api/identity/introspect", Token: tok}
	srv := exampleServer(in, a.store, a.log)
	go func() {
		if err := serveUntil(ctx, srv, s.ln); err != nil {
			a.log.Warn("demo orders server stopped", "err", err)
		}
	}()
	a.log.Info("demo orders server serving", "url", s.url())
	return nil
}
