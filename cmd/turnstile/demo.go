package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/web"
)

// demoConfigs are the demo's agents, in the same format as
// "turnstile config apply" files.
//
//go:embed demo/*.yaml
var demoConfigs embed.FS

// demoUsers are the demo's people: an admin, an operator who may approve,
// and a plain user who owns the runs.
var demoUsers = []runtime.User{
	{Name: "admin", Role: runtime.RoleAdmin},
	{Name: "operator", Role: runtime.RoleUser, Grants: []string{runtime.GrantApprove}},
	{Name: "user", Role: runtime.RoleUser},
}

// demoRuns wait for a decision on a fresh demo database.
var demoRuns = []struct{ configuration, prompt string }{
	{"refund-agent", "Please refund order ORD-1001, it arrived broken."},
	{"refund-agent-four-eyes", "Refund ORD-1002 in full."},
	{"input-agent", "Customer of ORD-1003 waited three weeks."},
	{"slow-agent", "Refund ORD-1004 and audit it."},
}

// seedDemo creates what the demo needs when absent, so a restart keeps
// what the previous run did.
func seedDemo(ctx context.Context, a *app, out io.Writer) error {
	if _, err := seedConfigsAndOrders(ctx, a); err != nil {
		return err
	}
	owner, fresh, err := seedUsers(ctx, a, out)
	if err != nil {
		return err
	}
	if !fresh {
		return nil
	}
	return startDemoRuns(ctx, a, owner, out)
}

// seedConfigsAndOrders creates the demo's configurations and orders that
// are absent, leaving the others as they are, and returns the identifiers
// of the demo's configurations.
func seedConfigsAndOrders(ctx context.Context, a *app) ([]string, error) {
	files, err := fs.Glob(demoConfigs, "demo/*.yaml")
	if err != nil {
		return nil, err
	}
	var identifiers []string
	for _, name := range files {
		data, err := demoConfigs.ReadFile(name)
		if err != nil {
			return nil, err
		}
		cfg, err := configfile.Parse(name, data, a.knownTool)
		if err != nil {
			return nil, err
		}
		identifiers = append(identifiers, cfg.Identifier)
		if _, err := a.store.ConfigurationByIdentifier(ctx, cfg.Identifier); err == nil {
			continue
		} else if !errors.Is(err, runtime.ErrNotFound) {
			return nil, err
		}
		if err := a.store.SaveConfiguration(ctx, cfg); err != nil {
			return nil, err
		}
	}
	if err := a.store.SeedDemoOrders(ctx, demoOrders); err != nil {
		return nil, err
	}
	return identifiers, nil
}

// startDemoRuns starts the demo's runs as owner and takes each to its
// first pause.
func startDemoRuns(ctx context.Context, a *app, owner runtime.Actor, out io.Writer) error {
	for _, r := range demoRuns {
		c, err := a.engine.Start(ctx, runtime.StartRequest{Configuration: r.configuration, Prompt: r.prompt, Owner: owner})
		if err != nil {
			return fmt.Errorf("demo run of %s: %w", r.configuration, err)
		}
		if out := c.Run(ctx, nil); out.Err != nil {
			return fmt.Errorf("demo run of %s: %w", r.configuration, out.Err)
		}
	}
	fmt.Fprintf(out, "demo: %d runs are waiting for a decision\n", len(demoRuns))
	return nil
}

// seedUsers creates the demo users that are missing, gives every demo user
// a fresh random password and prints it (so the demo never runs on a
// well-known password), and returns the owner of the demo runs and whether
// the users were new (a fresh demo).
func seedUsers(ctx context.Context, a *app, out io.Writer) (runtime.Actor, bool, error) {
	var owner runtime.Actor
	fresh := false
	fmt.Fprintln(out, "demo users (passwords are new at every start):")
	for _, u := range demoUsers {
		password, err := newPassword()
		if err != nil {
			return owner, false, err
		}
		hash, err := web.HashPassword(password)
		if err != nil {
			return owner, false, err
		}
		existing, err := a.store.UserByName(ctx, u.Name)
		switch {
		case errors.Is(err, runtime.ErrNotFound):
			u := u
			u.PasswordHash = hash
			if err := a.store.CreateUser(ctx, &u); err != nil {
				return owner, false, err
			}
			existing, fresh = &u, true
		case err != nil:
			return owner, false, err
		default:
			if err := a.store.SetPassword(ctx, existing.ID, hash); err != nil {
				return owner, false, err
			}
		}
		fmt.Fprintf(out, "  %-9s %-22s %s\n", u.Name, password, describe(u))
		if u.Name == "user" {
			owner = existing.Actor()
		}
	}
	return owner, fresh, nil
}

func describe(u runtime.User) string {
	switch {
	case u.Role == runtime.RoleAdmin:
		return "admin: sees every run, the playground"
	case len(u.Grants) > 0:
		return "operator: may approve any run"
	default:
		return "plain user: owns the demo runs"
	}
}

// demoOrders are the orders the demo seeds, ORD-1001 to ORD-1012, which
// the demo runs look up and refund; the first six are user's, the others
// operator's, as the example orders server tells them (orders-agent).
var demoOrders = []builtin.Order{
	{ID: "ORD-1001", Customer: "Ada Lovelace", AmountCents: 4999, Currency: "EUR", Owner: "user"},
	{ID: "ORD-1002", Customer: "Alan Turing", AmountCents: 12900, Currency: "EUR", Owner: "user"},
	{ID: "ORD-1003", Customer: "Grace Hopper", AmountCents: 2350, Currency: "USD", Owner: "user"},
	{ID: "ORD-1004", Customer: "Edsger Dijkstra", AmountCents: 8800, Currency: "EUR", Owner: "user"},
	{ID: "ORD-1005", Customer: "Barbara Liskov", AmountCents: 15000, Currency: "USD", Owner: "user"},
	{ID: "ORD-1006", Customer: "Donald Knuth", AmountCents: 256, Currency: "USD", Owner: "user"},
	{ID: "ORD-1007", Customer: "Margaret Hamilton", AmountCents: 31415, Currency: "USD", Owner: "operator"},
	{ID: "ORD-1008", Customer: "Ken Thompson", AmountCents: 6400, Currency: "USD", Owner: "operator"},
	{ID: "ORD-1009", Customer: "Frances Allen", AmountCents: 9900, Currency: "USD", Owner: "operator"},
	{ID: "ORD-1010", Customer: "Niklaus Wirth", AmountCents: 7250, Currency: "CHF", Owner: "operator"},
	{ID: "ORD-1011", Customer: "Sophie Wilson", AmountCents: 1999, Currency: "GBP", Owner: "operator"},
	{ID: "ORD-1012", Customer: "Leslie Lamport", AmountCents: 42000, Currency: "USD", Owner: "operator"},
}
