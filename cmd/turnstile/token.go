package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

const tokenUsage = `usage: turnstile token create --user NAME --scopes run:start,run:read,run:decide,run:cancel [--ttl 720h]
       turnstile token revoke --id N
       turnstile token list`

// token manages the JSON API's bearer tokens: "token create" prints the
// new token, and nothing else, on standard output — the only time it is
// shown; "token revoke" and "token list".
func token(ctx context.Context, args []string, e env) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintf(e.stdout, "%s\n\nRun \"turnstile token create --help\" for its flags.\n", helpOf(tokenUsage))
		return nil
	}
	if len(args) == 0 || (args[0] != "create" && args[0] != "revoke" && args[0] != "list") {
		return errors.New(tokenUsage)
	}
	fs := newFlagSet("token "+args[0], e)
	var d dbFlags
	d.register(fs)
	var (
		userName *string
		scopes   *string
		ttl      *time.Duration
		id       *int64
	)
	switch args[0] {
	case "create":
		userName = fs.String("user", "", "name of the user the token acts as")
		scopes = fs.String("scopes", "", "comma-separated scopes: "+strings.Join(runtime.AllScopes(), ","))
		ttl = fs.Duration("ttl", 720*time.Hour, "how long the token lives after its last use")
	case "revoke":
		id = fs.Int64("id", 0, "id of the token to revoke (see token list)")
	}
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("token %s: unexpected arguments %q\n%s", args[0], fs.Args(), tokenUsage)
	}
	switch {
	case args[0] == "create" && *userName == "":
		return errors.New("token create: --user is required")
	case args[0] == "create" && *scopes == "":
		return fmt.Errorf("token create: --scopes is required (%s)", strings.Join(runtime.AllScopes(), ","))
	case args[0] == "revoke" && *id <= 0:
		return errors.New("token revoke: --id is required (see turnstile token list)")
	}
	a, err := openLogged(ctx, d, e, "warn")
	if err != nil {
		return err
	}
	defer a.close()
	switch args[0] {
	case "create":
		u, err := a.store.UserByName(ctx, *userName)
		if errors.Is(err, runtime.ErrNotFound) {
			return fmt.Errorf("token create: no user %q (see turnstile user list)", *userName)
		}
		if err != nil {
			return err
		}
		plain, t, err := a.store.CreateToken(ctx, u.ID, strings.Split(*scopes, ","), *ttl)
		if err != nil {
			return err
		}
		fmt.Fprintln(e.stdout, plain)
		fmt.Fprintf(e.stderr, "token %d for %s (%s), valid for %s after each use; it is shown only this once\n",
			t.ID, u.Name, strings.Join(t.Scopes, ","), t.TTL)
		return nil
	case "revoke":
		if err := a.store.RevokeToken(ctx, *id); err != nil {
			if errors.Is(err, runtime.ErrNotFound) {
				return fmt.Errorf("token revoke: no token %d (see turnstile token list)", *id)
			}
			return err
		}
		fmt.Fprintf(e.stdout, "token %d revoked\n", *id)
		return nil
	default:
		tokens, err := a.store.ListTokens(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPREFIX\tUSER\tSCOPES\tEXPIRES\tLAST USED\tREVOKED")
		for _, t := range tokens {
			fmt.Fprintf(tw, "%d\t%s…\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Prefix, t.UserName, strings.Join(t.Scopes, ","),
				when(&t.ExpiresAt), when(t.LastUsedAt), when(t.RevokedAt))
		}
		return tw.Flush()
	}
}

// when formats a time for a listing; "-" when there is none.
func when(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}
