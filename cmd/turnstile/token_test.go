package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// turnstile runs a command in process and returns its output.
func turnstile(t *testing.T, dsn string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "TURNSTILE_DSN" {
			return dsn
		}
		return ""
	}
	err = run(context.Background(), args, getenv, strings.NewReader("a long password\n"), &out, &errOut)
	return out.String(), errOut.String(), err
}

// TestTokenCommands: token create prints the token and nothing else on
// standard output; the token works until it is revoked; token list shows
// it without it; user delete takes the user's tokens along.
func TestTokenCommands(t *testing.T) {
	db, dsn := dbtest.New(t)
	st := store.New(db)
	ctx := context.Background()
	if _, _, err := turnstile(t, dsn, "user", "add", "--name", "ada", "--role", "user"); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, err := turnstile(t, dsn, "token", "create", "--user", "ada", "--scopes", "run:read,run:decide", "--ttl", "2h")
	if err != nil {
		t.Fatalf("token create: %v\n%s", err, stderr)
	}
	if !regexp.MustCompile(`^tst_[0-9a-f]{64}\n$`).MatchString(stdout) {
		t.Fatalf("token create stdout = %q, want the token alone on one line", stdout)
	}
	plain := strings.TrimSpace(stdout)
	u, scopes, err := st.Authenticate(ctx, plain)
	if err != nil || u.Name != "ada" || strings.Join(scopes, ",") != "run:read,run:decide" {
		t.Fatalf("Authenticate(new token) = %v, %v, %v; want ada with run:read,run:decide", u, scopes, err)
	}

	stdout, _, err = turnstile(t, dsn, "token", "list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, plain[:12]) || !strings.Contains(stdout, "ada") || !strings.Contains(stdout, "run:read,run:decide") {
		t.Errorf("token list = %q, want the token's prefix, user and scopes", stdout)
	}
	if strings.Contains(stdout, plain[12:]) {
		t.Errorf("token list shows the whole token: %q", stdout)
	}
	tokens, err := st.ListTokens(ctx)
	if err != nil || len(tokens) != 1 {
		t.Fatalf("ListTokens = %v, %v", tokens, err)
	}
	id := tokens[0].ID

	if _, _, err := turnstile(t, dsn, "token", "revoke", "--id", "0"); err == nil || !strings.Contains(err.Error(), "--id") {
		t.Errorf("token revoke --id 0 = %v, want an error about --id", err)
	}
	if _, _, err := turnstile(t, dsn, "token", "revoke", "--id", "999"); err == nil || !strings.Contains(err.Error(), "no token 999") {
		t.Errorf("token revoke of no token = %v, want no token 999", err)
	}
	stdout, _, err = turnstile(t, dsn, "token", "revoke", "--id", strconv.FormatInt(id, 10))
	if err != nil || !strings.Contains(stdout, "revoked") {
		t.Fatalf("token revoke = %q, %v", stdout, err)
	}
	if _, _, err := st.Authenticate(ctx, plain); !errors.Is(err, runtime.ErrTokenInvalid) {
		t.Errorf("Authenticate(revoked) = %v, want ErrTokenInvalid", err)
	}

	// Deleting the user deletes the rest of their tokens.
	if _, _, err := turnstile(t, dsn, "token", "create", "--user", "ada", "--scopes", "run:start"); err != nil {
		t.Fatal(err)
	}
	stdout, _, err = turnstile(t, dsn, "user", "delete", "--name", "ada")
	if err != nil || !strings.Contains(stdout, "ada deleted") {
		t.Fatalf("user delete = %q, %v", stdout, err)
	}
	if tokens, err := st.ListTokens(ctx); err != nil || len(tokens) != 0 {
		t.Errorf("tokens after user delete = %v, %v; want none", tokens, err)
	}
	if _, _, err := turnstile(t, dsn, "user", "delete", "--name", "ada"); err == nil || !strings.Contains(err.Error(), `no user "ada"`) {
		t.Errorf("second user delete = %v, want no user", err)
	}
}

func TestTokenCommandRefusals(t *testing.T) {
	_, dsn := dbtest.New(t)
	if _, _, err := turnstile(t, dsn, "user", "add", "--name", "ada"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", []string{"token"}, "usage: turnstile token create"},
		{"unknown subcommand", []string{"token", "mint"}, "usage: turnstile token create"},
		{"no user", []string{"token", "create", "--scopes", "run:read"}, "--user is required"},
		{"no scopes", []string{"token", "create", "--user", "ada"}, "--scopes is required"},
		{"unknown user", []string{"token", "create", "--user", "bob", "--scopes", "run:read"}, `no user "bob"`},
		{"unknown scope", []string{"token", "create", "--user", "ada", "--scopes", "run:read,admin"}, `unknown scope "admin"`},
		{"bad ttl", []string{"token", "create", "--user", "ada", "--scopes", "run:read", "--ttl", "0s"}, "lifetime"},
		{"no id", []string{"token", "revoke"}, "--id is required"},
		{"stray argument", []string{"token", "list", "extra"}, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, _, err := turnstile(t, dsn, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("turnstile %s = %v, want an error containing %q", strings.Join(tt.args, " "), err, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout = %q on an error, want nothing", stdout)
			}
		})
	}
}
