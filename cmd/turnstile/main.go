// Command turnstile is the Turnstile server and its administration
// commands: serve, work, migrate, user, token, config, webhooks, state,
// demo and version.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "turnstile:", err)
		os.Exit(1)
	}
}

// env gives a command what it reads from outside its flags.
type env struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// localDSNs lists the databases the commands other than serve and work
	// try when no DSN is given; nil tries none.
	localDSNs func() []string
}

const usage = `Turnstile serves LLM agent runs that pause for a human.

Usage: turnstile <command> [flags]

Commands:
  serve     migrate the database and serve HTTP
  work      run workers only: durable decisions, queued runs, recovery
  migrate   apply the database migrations and exit
  user      add, list or delete users (user add --name N --role admin|user [--grant approve];
            user list; user delete --name N, which deletes their API tokens too
            and cancels their unsettled runs)
  token     create, revoke or list API bearer tokens (token create --user N
            --scopes run:start,run:read,run:decide,run:cancel [--ttl 720h] prints only
            the token, once; token revoke --id N; token list)
  config    manage agent configurations as YAML files (config apply FILE.yaml
            creates or updates one; config list; config export IDENTIFIER
            prints one in the format apply reads)
  webhooks  list the webhook deliveries (webhooks list [--failed]) or send a
            failed one again (webhooks retry --id N)
  state     state reseal [--batch 500]: seal the run content stored plain and
            bind older sealed content to its row, under the first state key
  demo      demo reset: delete the demo's runs and refunds and start its
            waiting runs again, to replay the tour (users keep their passwords)
  examplemcp serve the example internal MCP server: the demo orders of the
            person a run credential acts for, asked of --introspect-url with
            the token in TURNSTILE_EXAMPLEMCP_TOKEN (serve --demo runs one itself)
  version   print the version, the VCS revision and the Go version

Run "turnstile <command> --help" for a command's flags; every flag can also
be set through the environment variable shown beside it. Without --dsn or
TURNSTILE_DSN, migrate, user, token, config, webhooks, state and demo use
the database make run uses when it answers:
root@tcp(127.0.0.1:3306)/turnstile, or the private server under ./var/mysql.

TURNSTILE_STATE_KEYS=id:base64key[,id:base64key…] encrypts run content at
rest with AES-GCM under the first key, each value bound to its row; the
others still decrypt, so a new key goes in front of the old ones (state
reseal then moves everything under it). It is read from the environment
only. Without it, content is stored plain; with it, plain content is
unreadable until state reseal has sealed it. TURNSTILE_STATE_FORMAT=1 seals
as the previous version did, bound to no row, for its processes to read
during a rolling upgrade.
`

// isHelp reports whether a subcommand's place holds a request for help.
func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// helpOf is a "usage: …" error text as the help that --help prints.
func helpOf(usage string) string { return "Usage:" + strings.TrimPrefix(usage, "usage:") }

// run is main without the process: it returns errors instead of exiting,
// so tests can call it. Help that was asked for goes to stdout and returns
// nil or flag.ErrHelp, both a success.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	e := env{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr, localDSNs: localDSNs}
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command given")
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], e)
	case "migrate":
		return migrate(ctx, args[1:], e)
	case "work":
		return work(ctx, args[1:], e)
	case "user":
		return user(ctx, args[1:], e)
	case "token":
		return token(ctx, args[1:], e)
	case "config":
		return configCommand(ctx, args[1:], e)
	case "webhooks":
		return webhooks(ctx, args[1:], e)
	case "state":
		return stateCommand(ctx, args[1:], e)
	case "demo":
		return demoCommand(ctx, args[1:], e)
	case "examplemcp":
		return exampleMCP(ctx, args[1:], e)
	case "version", "--version", "-version":
		return version(args[1:], e)
	case "help", "-h", "-help", "--help":
		if len(args) > 1 && args[1] != "help" && !isHelp(args[1]) {
			// "turnstile help serve" is "turnstile serve --help".
			return run(ctx, []string{args[1], "--help"}, getenv, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}
