package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/config"
	"github.com/turnstile-dev/turnstile/store"
)

const configUsage = `usage: turnstile config apply FILE.yaml   (FILE "-" reads standard input)
       turnstile config list
       turnstile config export IDENTIFIER`

// configCommand manages agent configurations as files: "config apply"
// creates or updates one from a YAML file, "config list" lists them and
// "config export" writes one in the format apply reads, so an export
// applied again changes nothing.
func configCommand(ctx context.Context, args []string, e env) error {
	if len(args) == 0 || (args[0] != "apply" && args[0] != "list" && args[0] != "export") {
		return errors.New(configUsage)
	}
	sub := args[0]
	fs := newFlagSet("config "+sub, e)
	flagUsage := fs.Usage
	fs.Usage = func() { fmt.Fprintln(fs.Output(), configUsage); flagUsage() }
	var d dbFlags
	d.register(fs)
	operands, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return err
	}
	want := 1
	if sub == "list" {
		want = 0
	}
	if len(operands) != want {
		return fmt.Errorf("config %s: want %d argument(s), got %q\n%s", sub, want, operands, configUsage)
	}
	var data []byte
	if sub == "apply" {
		// Read the file before touching the database: a missing file is
		// the most common mistake and needs no DSN to report.
		if data, err = readConfigFile(operands[0], e.stdin); err != nil {
			return fmt.Errorf("config apply: %w", err)
		}
	}
	a, err := openLogged(ctx, d, e, "warn")
	if err != nil {
		return err
	}
	defer a.close()
	switch sub {
	case "apply":
		return applyConfig(ctx, a, operands[0], data, e.stdout)
	case "export":
		return exportConfig(ctx, a, operands[0], e.stdout)
	default:
		return listConfigs(ctx, a, e.stdout)
	}
}

// parseInterleaved parses flags given before, between and after the
// operands, so that "config apply agent.yaml --dsn …" works too, and
// returns the operands.
func parseInterleaved(fs *flagSet, args []string) ([]string, error) {
	if err := fs.parse(args); err != nil {
		return nil, err
	}
	var operands []string
	for rest := fs.Args(); len(rest) > 0; rest = fs.Args() {
		operands = append(operands, rest[0])
		if err := fs.Parse(rest[1:]); err != nil {
			return nil, err
		}
	}
	return operands, nil
}

func readConfigFile(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// applyConfig validates a configuration file and stores it; the file's
// first error, "file:line: message", is returned as it is and nothing is
// written. It prints what it did: created, updated or unchanged.
func applyConfig(ctx context.Context, a *app, name string, data []byte, out io.Writer) error {
	if name == "-" {
		name = "<stdin>"
	}
	cfg, err := config.Parse(name, data, a.knownTool)
	if err != nil {
		return err
	}
	verb := "created"
	old, err := a.store.ConfigurationByIdentifier(ctx, cfg.Identifier)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	default:
		same, err := sameDefinition(old, cfg)
		if err != nil {
			return err
		}
		if same {
			fmt.Fprintf(out, "configuration %s unchanged\n", cfg.Identifier)
			return nil
		}
		verb = "updated"
	}
	if err := a.store.SaveConfiguration(ctx, cfg); err != nil {
		return err
	}
	fmt.Fprintf(out, "configuration %s %s\n", cfg.Identifier, verb)
	return nil
}

// sameDefinition compares two configurations as the store keeps them.
func sameDefinition(a, b *runtime.Configuration) (bool, error) {
	ja, err := json.Marshal(a)
	if err != nil {
		return false, fmt.Errorf("config apply: compare %s: %w", a.Identifier, err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return false, fmt.Errorf("config apply: compare %s: %w", b.Identifier, err)
	}
	return bytes.Equal(ja, jb), nil
}

func exportConfig(ctx context.Context, a *app, identifier string, out io.Writer) error {
	cfg, err := a.store.ConfigurationByIdentifier(ctx, identifier)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("config export: no configuration %q (see turnstile config list)", identifier)
	}
	if err != nil {
		return err
	}
	data, err := config.Marshal(cfg)
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	return err
}

func listConfigs(ctx context.Context, a *app, out io.Writer) error {
	cfgs, err := a.store.Configurations(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IDENTIFIER\tNAME\tACTIVE\tPROVIDER\tTOOLS")
	for _, c := range cfgs {
		provider := c.Provider.Type
		if c.Provider.Model != "" {
			provider += " (" + c.Provider.Model + ")"
		}
		tools := strings.Join(c.Tools, ",")
		if tools == "" {
			tools = "-"
		}
		active := "no"
		if c.Active {
			active = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Identifier, c.Name, active, provider, tools)
	}
	return tw.Flush()
}
