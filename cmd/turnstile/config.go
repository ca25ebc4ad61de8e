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
	"sync"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/runtime/tool/mcp"
)

const configUsage = `usage: turnstile config apply FILE.yaml   (FILE "-" reads standard input)
       turnstile config list
       turnstile config export IDENTIFIER`

// configCommand manages agent configurations as files: "config apply"
// creates or updates one from a YAML file, "config list" lists them and
// "config export" writes one in the format apply reads, so an export
// applied again changes nothing.
func configCommand(ctx context.Context, args []string, e env) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintf(e.stdout, "%s\n\nRun \"turnstile config apply --help\" for the flags.\n", helpOf(configUsage))
		return nil
	}
	if len(args) == 0 || (args[0] != "apply" && args[0] != "list" && args[0] != "export") {
		return errors.New(configUsage)
	}
	sub := args[0]
	fs := newFlagSet("config "+sub, e)
	fs.usage = func(w io.Writer) { fmt.Fprintf(w, "%s\n\n", helpOf(configUsage)); fs.printFlags(w) }
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
		return applyConfig(ctx, a, operands[0], data, e)
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
		if err := fs.parseArgs(rest[1:]); err != nil {
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

// applyConfig validates a configuration file and stores it. A file with
// errors writes nothing and gets them all, as configfile.Parse returns
// them: one "file:line: message" a line, in the file's order. It prints
// what it did, created, updated or unchanged, and then warns on standard
// error about each MCP server a run could not reach now (see warnMCP) and
// each notify entry whose secret_env is unset here, which refuse nothing.
func applyConfig(ctx context.Context, a *app, name string, data []byte, e env) error {
	if name == "-" {
		name = "<stdin>"
	}
	cfg, err := configfile.Parse(name, data, a.knownTool)
	if err != nil {
		return err
	}
	if err := storeConfig(ctx, a, cfg, e.stdout); err != nil {
		return err
	}
	warnMCP(ctx, name, data, cfg, e.getenv, e.stderr)
	for _, w := range configfile.NotifyWarnings(name, data, cfg, e.getenv) {
		fmt.Fprintln(e.stderr, w)
	}
	return nil
}

// storeConfig creates or updates a configuration, or leaves it as it is
// when its definition is the same, and says which.
func storeConfig(ctx context.Context, a *app, cfg *runtime.Configuration, out io.Writer) error {
	verb := "created"
	old, err := a.store.ConfigurationByIdentifier(ctx, cfg.Identifier)
	switch {
	case errors.Is(err, runtime.ErrNotFound):
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
	if errors.Is(err, runtime.ErrNotFound) {
		return fmt.Errorf("config export: no configuration %q (see turnstile config list)", identifier)
	}
	if err != nil {
		return err
	}
	data, err := configfile.Marshal(cfg)
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

// mcpCheckTimeout bounds config apply's connection to one MCP server, and
// then its listing of the server's tools.
const mcpCheckTimeout = 5 * time.Second

// warnMCP writes a warning, "file:line: warning: mcp server NAME: …", for
// each ${NAME} of an MCP server entry that is unset in this environment
// and for each server whose tools cannot be listed now (checked at once,
// each within mcpCheckTimeout). A run reaches the servers later and from
// the environment of serve or work, so none of this refuses the file: a
// warning is what a person can still fix before a run fails over it.
func warnMCP(ctx context.Context, file string, data []byte, cfg *runtime.Configuration, getenv func(string) string, w io.Writer) {
	if len(cfg.MCPServers) == 0 {
		return
	}
	lines := mcpLines(data)
	src := mcp.NewSource(mcp.Options{Getenv: getenv, ConnectTimeout: mcpCheckTimeout, RetryAfter: -1})
	defer src.Close()
	warnings := make([][]string, len(cfg.MCPServers))
	var wg sync.WaitGroup
	for i, srv := range cfg.MCPServers {
		at := lines[srv.Name]
		if missing := mcp.MissingVariables(srv, getenv); len(missing) > 0 {
			for _, v := range missing {
				warnings[i] = append(warnings[i], fmt.Sprintf("%s: warning: mcp server %s: environment variable %s is unset here; runs need it where turnstile serve and work run",
					at.position(file, at.vars[v]), srv.Name, v))
			}
			continue
		}
		if srv.Identity == runtime.IdentityForward {
			// Its tools are listed with a run's credential, which there is
			// none of here; the server answers 401 without one.
			continue
		}
		wg.Go(func() {
			if _, err := src.Check(ctx, srv); err != nil {
				warnings[i] = append(warnings[i], fmt.Sprintf("%s: warning: %s", at.position(file, at.url), err.Error()))
			}
		})
	}
	wg.Wait()
	for _, ws := range warnings {
		for _, line := range ws {
			fmt.Fprintln(w, line)
		}
	}
}

// serverLines are where an mcp_servers entry is in its file: the entry,
// its url and the first mention of each ${NAME}; 0 where unknown.
type serverLines struct {
	entry, url int
	vars       map[string]int
}

// position is "file:line" of the first known line of line and the
// entry's, or "file" when neither is known.
func (l serverLines) position(file string, line int) string {
	if line == 0 {
		line = l.entry
	}
	if line == 0 {
		return file
	}
	return fmt.Sprintf("%s:%d", file, line)
}

// mcpLines finds the lines of the mcp_servers entries of a configuration
// file, by server name. configfile.Parse has checked the file already; what
// this does not find simply has no line.
func mcpLines(data []byte) map[string]serverLines {
	out := map[string]serverLines{}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		return out
	}
	top := resolveYAML(&doc)
	servers := mappingValue(top, "mcp_servers")
	if servers == nil || servers.Kind != yaml.SequenceNode {
		return out
	}
	for _, item := range servers.Content {
		item = resolveYAML(item)
		name := mappingValue(item, "name")
		if name == nil || name.Kind != yaml.ScalarNode {
			continue
		}
		l := serverLines{entry: item.Line, vars: map[string]int{}}
		if u := mappingValue(item, "url"); u != nil {
			l.url = u.Line
		}
		walkScalars(item, func(n *yaml.Node) {
			for _, v := range mcp.Variables(n.Value) {
				if _, ok := l.vars[v]; !ok && strings.Contains(n.Value, "${"+v+"}") {
					l.vars[v] = n.Line
				}
			}
		})
		out[name.Value] = l
	}
	return out
}

// resolveYAML follows aliases and steps into a document.
func resolveYAML(n *yaml.Node) *yaml.Node {
	for n != nil && (n.Kind == yaml.AliasNode || (n.Kind == yaml.DocumentNode && len(n.Content) == 1)) {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		} else {
			n = n.Content[0]
		}
	}
	return n
}

// mappingValue is the value of key in mapping n, or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return resolveYAML(n.Content[i+1])
		}
	}
	return nil
}

// walkScalars calls fn with every scalar under n, in file order. It
// follows no alias: an alias has no line of its own, and following them
// could visit one node exponentially often.
func walkScalars(n *yaml.Node, fn func(*yaml.Node)) {
	if n == nil || n.Kind == yaml.AliasNode {
		return
	}
	if n.Kind == yaml.ScalarNode {
		fn(n)
		return
	}
	for _, c := range n.Content {
		walkScalars(c, fn)
	}
}
