package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/web"
)

const userUsage = `usage: turnstile user add --name N --role admin|user [--grant approve[,other…]]
       turnstile user list
       turnstile user delete --name N`

// user manages users: "user add", "user list" and "user delete", which
// deletes the user's API tokens with them and cancels their unsettled
// runs.
func user(ctx context.Context, args []string, e env) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintf(e.stdout, "%s\n\nRun \"turnstile user add --help\" for its flags.\n", helpOf(userUsage))
		return nil
	}
	if len(args) == 0 || (args[0] != "add" && args[0] != "list" && args[0] != "delete") {
		return errors.New(userUsage)
	}
	fs := newFlagSet("user "+args[0], e)
	var d dbFlags
	d.register(fs)
	// Each subcommand takes only the flags it reads, so its --help lists
	// no others.
	var name, role, grants string
	if args[0] != "list" {
		fs.StringVar(&name, "name", "", "the user's sign-in name")
	}
	if args[0] == "delete" {
		// Cancelling a run notifies its configuration's endpoints, whose
		// links start with this.
		fs.StringVar(&d.publicURL, "public-url", "", "where people reach this Turnstile, e.g. https://turnstile.example: the base of the links in the run.settled notifications of the runs it cancels (default: http://127.0.0.1:8080)")
	}
	if args[0] == "add" {
		fs.StringVar(&role, "role", "user", "admin or user")
		fs.StringVar(&grants, "grant", "", "comma-separated grants, e.g. approve")
	}
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	a, err := openLogged(ctx, d, e, "warn")
	if err != nil {
		return err
	}
	defer a.close()
	if args[0] == "list" {
		users, err := a.store.ListUsers(ctx)
		if err != nil {
			return err
		}
		for _, u := range users {
			fmt.Fprintf(e.stdout, "%s\t%s\t%s\n", u.Name, u.Role, strings.Join(u.Grants, ","))
		}
		return nil
	}
	if args[0] == "delete" {
		return deleteUser(ctx, a, name, e)
	}
	if name == "" {
		return errors.New("user add: --name is required")
	}
	if role != string(runtime.RoleAdmin) && role != string(runtime.RoleUser) {
		return fmt.Errorf("user add: --role must be admin or user, not %q", role)
	}
	password, generated, err := readPassword(e.stdin)
	if err != nil {
		return err
	}
	hash, err := web.HashPassword(password)
	if err != nil {
		return err
	}
	u := &runtime.User{Name: name, Role: runtime.Role(role), PasswordHash: hash}
	if grants != "" {
		u.Grants = strings.Split(grants, ",")
	}
	if err := a.store.CreateUser(ctx, u); err != nil {
		return err
	}
	if generated {
		fmt.Fprintf(e.stdout, "user %s created; password (shown once): %s\n", u.Name, password)
	} else {
		fmt.Fprintf(e.stdout, "user %s created\n", u.Name)
	}
	return nil
}

// deleteUser deletes a user and their API tokens, and cancels every run
// of theirs that has not settled (see runtime.Engine.DeleteUser); the runs
// themselves stay, as records.
func deleteUser(ctx context.Context, a *app, name string, e env) error {
	if name == "" {
		return errors.New("user delete: --name is required")
	}
	u, err := a.store.UserByName(ctx, name)
	if errors.Is(err, runtime.ErrNotFound) {
		return fmt.Errorf("user delete: no user %q", name)
	}
	if err != nil {
		return err
	}
	d, err := a.engine.DeleteUser(ctx, u.ID)
	if errors.Is(err, runtime.ErrNotFound) {
		return fmt.Errorf("user delete: no user %q", name)
	}
	if err != nil {
		return fmt.Errorf("user delete: %w", err)
	}
	fmt.Fprintf(e.stdout, "user %s deleted: %s deleted, %s cancelled", u.Name, count(int64(d.Tokens), "API token"), count(int64(d.Cancelled+d.Stopping), "run"))
	if d.Stopping > 0 {
		fmt.Fprintf(e.stdout, " (%d running, which stop at their next step)", d.Stopping)
	}
	fmt.Fprintln(e.stdout)
	return nil
}

// readPassword reads the password from standard input when it is not a
// terminal (a pipe or a file); otherwise it generates one.
func readPassword(stdin io.Reader) (string, bool, error) {
	if f, ok := stdin.(*os.File); ok {
		if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice != 0 {
			p, err := newPassword()
			return p, true, err
		}
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", false, fmt.Errorf("read password: %w", err)
	}
	password := strings.TrimRight(line, "\r\n")
	if len(password) < 8 {
		return "", false, errors.New("the password on standard input must have at least 8 characters")
	}
	return password, false, nil
}

// newPassword returns a random password of 16 URL-safe characters.
func newPassword() (string, error) {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}
