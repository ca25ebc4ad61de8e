package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/seal"
	"github.com/turnstile-dev/turnstile/store"
)

const stateUsage = `usage: turnstile state reseal [--batch 500]`

// maxResealBatch bounds state reseal --batch: a batch is one transaction.
const maxResealBatch = 10000

// progressEvery is how often state reseal says how far it got within a
// table, beside the first batch of each and its end.
const progressEvery = time.Second

// stateCommand manages run content at rest. "state reseal" seals what is
// stored plain and binds older sealed content to its place, under the
// first key of TURNSTILE_STATE_KEYS.
func stateCommand(ctx context.Context, args []string, e env) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintf(e.stdout, "%s\n\nRun \"turnstile state reseal --help\" for its flags.\n", helpOf(stateUsage))
		return nil
	}
	if len(args) == 0 || args[0] != "reseal" {
		return errors.New(stateUsage)
	}
	fs := newFlagSet("state reseal", e)
	var d dbFlags
	d.register(fs)
	batch := fs.Int("batch", 500, fmt.Sprintf("rows per batch, each one transaction (1 to %d)", maxResealBatch))
	if err := fs.parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("state reseal: unexpected arguments %q\n%s", fs.Args(), stateUsage)
	}
	if *batch < 1 || *batch > maxResealBatch {
		return fmt.Errorf("state reseal: --batch must be between 1 and %d, not %d", maxResealBatch, *batch)
	}
	if strings.TrimSpace(e.getenv(stateKeysVar)) == "" {
		return errors.New("state reseal: " + stateKeysVar + " is not set: there is no key to seal with (set it as serve and work have it)")
	}
	a, err := openLogged(ctx, d, e, "warn")
	if err != nil {
		return err
	}
	defer a.close()
	keys, ok := a.sealer.(*seal.Keyring)
	if !ok {
		return errors.New("state reseal: " + stateKeysVar + " holds no keyring")
	}
	if keys.Sealing() != 2 {
		return errors.New("state reseal: " + stateFormatVar + "=1 seals content unbound, for the processes of the previous version: " +
			"reseal once every process runs this version, without " + stateFormatVar)
	}
	r := resealer{store: a.store, keys: keys, batch: *batch, progress: e.stderr, unknown: map[string]int{}}
	if err := r.run(ctx); err != nil {
		return err
	}
	return r.report(e.stdout)
}

// resealer goes through every table of sealed content, batch by batch,
// and counts what it did.
type resealer struct {
	store    *store.Store
	keys     *seal.Keyring
	batch    int
	progress io.Writer
	// rows read, values changed, and values a server rewrote meanwhile.
	rows, changed, moved int
	// What could not be opened: values by the missing key's id, and
	// values that do not authenticate at their place.
	unknown map[string]int
	corrupt int
}

// run reseals every table; a cancelled ctx stops it between batches, or
// in one, which then writes nothing.
func (r *resealer) run(ctx context.Context) error {
	for _, table := range store.SealedTables() {
		var (
			cursor               store.ResealCursor
			rows, changed, moved int
			said                 time.Time
		)
		for first := true; ; first = false {
			b, err := r.store.Reseal(ctx, table, cursor, r.batch, r.keys.BoundPrefix(), r.rebind)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("state reseal: interrupted in %s after %d rows: %w; run it again to go on (what it did stays done)", table, rows, ctx.Err())
				}
				return fmt.Errorf("state reseal: %w", err)
			}
			cursor = b.Next
			rows, changed, moved = rows+b.Rows, changed+b.Changed, moved+b.Moved
			if b.Rows < r.batch {
				break
			}
			if first || time.Since(said) >= progressEvery {
				fmt.Fprintf(r.progress, "reseal: %s: %d rows so far, %d values changed\n", table, rows, changed)
				said = time.Now()
			}
		}
		line := fmt.Sprintf("reseal: %s: done, %d rows, %d values changed", table, rows, changed)
		if moved > 0 {
			line += fmt.Sprintf(", %d rewritten by a server meanwhile", moved)
		}
		fmt.Fprintln(r.progress, line)
		r.rows, r.changed, r.moved = r.rows+rows, r.changed+changed, r.moved+moved
	}
	return nil
}

// rebind is the store's Rebind: a value as the keyring seals it for its
// place today, or nil for one that already is, or that cannot be opened
// (counted, and left as it is).
func (r *resealer) rebind(at runtime.Place, value []byte) ([]byte, error) {
	rebound, changed, err := r.keys.Rebind(value, at)
	switch {
	case errors.Is(err, seal.ErrUnknownKey):
		id, _ := seal.KeyID(value)
		r.unknown[id]++
		return nil, nil
	case errors.Is(err, seal.ErrCorrupt):
		r.corrupt++
		return nil, nil
	case err != nil:
		return nil, err
	case !changed:
		return nil, nil
	}
	return rebound, nil
}

// report writes what the reseal did, and fails when it left values it
// could not open.
func (r *resealer) report(out io.Writer) error {
	fmt.Fprintf(out, "reseal done: %d values changed, %d rows read; what opened is sealed under key %q, bound to its place\n",
		r.changed, r.rows, r.keys.SealingKey())
	if r.moved > 0 {
		fmt.Fprintf(out, "%d values were rewritten by a running server meanwhile and kept as it wrote them; run state reseal again to check them\n", r.moved)
	}
	var left []string
	for _, id := range slices.Sorted(maps.Keys(r.unknown)) {
		left = append(left, fmt.Sprintf("%d sealed under key %q, which %s does not hold", r.unknown[id], id, stateKeysVar))
	}
	if r.corrupt > 0 {
		left = append(left, fmt.Sprintf("%d that do not open at their place (altered, or copied there from another row)", r.corrupt))
	}
	if len(left) > 0 {
		return fmt.Errorf("state reseal: values left as they were, unreadable here: %s", strings.Join(left, "; "))
	}
	return nil
}
