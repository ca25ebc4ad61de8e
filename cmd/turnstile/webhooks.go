package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/turnstile-dev/turnstile/runtime"
)

const webhooksUsage = `usage: turnstile webhooks list [--failed] [--limit 50]
       turnstile webhooks retry --id N`

// maxListedDeliveries bounds webhooks list --limit: a listing is for
// people, and the table holds every delivery ever made.
const maxListedDeliveries = 1000

// webhooks shows the outbox to operators: "webhooks list" the newest
// deliveries (--failed: those the workers gave up on), "webhooks retry"
// hands a failed one back to the workers, due at once.
func webhooks(ctx context.Context, args []string, e env) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintf(e.stdout, "%s\n\nRun \"turnstile webhooks list --help\" for its flags.\n", helpOf(webhooksUsage))
		return nil
	}
	if len(args) == 0 || (args[0] != "list" && args[0] != "retry") {
		return errors.New(webhooksUsage)
	}
	fs := newFlagSet("webhooks "+args[0], e)
	var d dbFlags
	d.register(fs)
	var (
		failed *bool
		limit  *int
		id     *int64
	)
	switch args[0] {
	case "list":
		failed = fs.Bool("failed", false, "only the deliveries the workers gave up on")
		limit = fs.Int("limit", 50, "most deliveries to list, newest first (at most "+strconv.Itoa(maxListedDeliveries)+")")
	case "retry":
		id = fs.Int64("id", 0, "id of the failed delivery to send again (see webhooks list --failed)")
	}
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("webhooks %s: unexpected arguments %q\n%s", args[0], fs.Args(), webhooksUsage)
	}
	switch {
	case args[0] == "list" && (*limit < 1 || *limit > maxListedDeliveries):
		return fmt.Errorf("webhooks list: --limit must be between 1 and %d, not %d", maxListedDeliveries, *limit)
	case args[0] == "retry" && *id <= 0:
		return errors.New("webhooks retry: --id is required (see turnstile webhooks list --failed)")
	}
	a, err := openLogged(ctx, d, e, "warn")
	if err != nil {
		return err
	}
	defer a.close()
	if args[0] == "retry" {
		return retryDelivery(ctx, a, *id, e.stdout)
	}
	ds, err := a.store.ListDeliveries(ctx, *failed, *limit)
	if err != nil {
		return err
	}
	return listDeliveries(e.stdout, ds)
}

func retryDelivery(ctx context.Context, a *app, id int64, out io.Writer) error {
	err := a.store.RetryDelivery(ctx, id)
	var notFailed *runtime.DeliveryNotFailedError
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return fmt.Errorf("webhooks retry: no delivery %d (see turnstile webhooks list)", id)
	case errors.As(err, &notFailed):
		return fmt.Errorf("webhooks retry: %w", notFailed)
	case err != nil:
		return err
	}
	fmt.Fprintf(out, "delivery %d is pending again and due now; a worker sends it with the same webhook-id\n", id)
	return nil
}

// listDeliveries writes the deliveries as a table, one a line; of a URL,
// its scheme and host only (a Slack webhook's URL is its credential, and
// listings end up in terminals' scrollback and tickets).
func listDeliveries(out io.Writer, ds []runtime.DeliveryInfo) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tWEBHOOK ID\tRUN\tEVENT\tTARGET\tSTATUS\tATTEMPTS\tLAST\tNEXT ATTEMPT")
	for _, d := range ds {
		next := "-"
		if d.Pending() {
			next = when(&d.NextAttemptAt)
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", d.ID, d.WebhookID, d.RunID, d.Event, oneLine(d.Target(), 80),
			d.Status, d.Attempts, lastAnswer(d), next)
	}
	return tw.Flush()
}

// lastAnswer is how the last attempt ended, in a cell; "-" before the
// first.
func lastAnswer(d runtime.DeliveryInfo) string {
	if a := d.LastAnswer(); a != "" {
		return oneLine(a, 60)
	}
	return "-"
}

// oneLine makes s fit a table cell: control characters (a receiver's
// error text may hold tabs and newlines, which would break the columns)
// become spaces, and it is cut to n runes with an ellipsis.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
