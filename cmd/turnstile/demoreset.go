package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/turnstile-dev/turnstile/runtime"
)

const demoUsage = `usage: turnstile demo reset [--dsn DSN]`

// demoCommand is "demo reset": it replays the tour on a demo database.
func demoCommand(ctx context.Context, args []string, e env) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(e.stdout, helpOf(demoUsage)+"\n\n"+demoResetHelp)
		return nil
	}
	if len(args) == 0 || args[0] != "reset" {
		return errors.New(demoUsage)
	}
	fs := newFlagSet("demo reset", e)
	fs.usage = func(w io.Writer) {
		fmt.Fprintf(w, "Usage: turnstile demo reset [flags]\n\n%s\n\n", demoResetHelp)
		fs.printFlags(w)
	}
	var d dbFlags
	d.register(fs)
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("demo reset: unexpected arguments %q\n%s", fs.Args(), demoUsage)
	}
	a, err := openLogged(ctx, d, e, "warn")
	if err != nil {
		return err
	}
	defer a.close()
	return resetDemo(ctx, a, e.stdout)
}

const demoResetHelp = `demo reset deletes every run of the demo's configurations (with their events,
transcripts, decisions and standing approvals) and every demo refund, then
starts the demo's waiting runs again. The demo users and their passwords stay:
turnstile serve --demo prints new ones at every start. A run that a server or
worker is continuing right now stops the reset before it deletes anything.`

// resetDemo deletes the demo's runs and refunds and starts the demo's
// runs again as the demo's plain user. It needs the demo's users (serve
// --demo creates them) and recreates its configurations and orders when
// absent. When a demo run is held by a live continuation it deletes
// nothing and says so.
func resetDemo(ctx context.Context, a *app, out io.Writer) error {
	owner, err := a.store.UserByName(ctx, "user")
	if errors.Is(err, runtime.ErrNotFound) {
		return errors.New(`demo reset: there is no demo user "user" here; start turnstile serve --demo (make run) once to create the demo`)
	}
	if err != nil {
		return fmt.Errorf("demo reset: %w", err)
	}
	identifiers, err := seedConfigsAndOrders(ctx, a)
	if err != nil {
		return fmt.Errorf("demo reset: %w", err)
	}
	runs, refunds, err := a.store.DeleteDemoRuns(ctx, identifiers)
	if err != nil {
		return fmt.Errorf("demo reset: %w", err)
	}
	fmt.Fprintf(out, "demo: deleted %s and %s\n", count(runs, "run"), count(refunds, "refund"))
	return startDemoRuns(ctx, a, owner.Actor(), out)
}

// count is "1 run", "2 runs".
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
