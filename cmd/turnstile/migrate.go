package main

import (
	"context"
	"fmt"
)

// migrate applies the migrations and exits; serve does the same at start.
func migrate(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("migrate", e)
	var d dbFlags
	d.register(fs)
	if err := fs.parse(args); err != nil {
		return err
	}
	a, err := openLogged(ctx, d, e, "info")
	if err != nil {
		return err
	}
	defer a.close()
	fmt.Fprintln(e.stdout, "migrations applied")
	return nil
}
