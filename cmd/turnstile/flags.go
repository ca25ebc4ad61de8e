package main

import (
	"flag"
	"fmt"
	"strings"
)

// flagSet is a command's flags, each of which can also come from a
// TURNSTILE_* environment variable; a flag on the command line wins.
type flagSet struct {
	*flag.FlagSet
	env env
}

func newFlagSet(name string, e env) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	f := &flagSet{FlagSet: fs, env: e}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: turnstile %s [flags]\n\nFlags (environment variable in brackets):\n", name)
		fs.VisitAll(func(fl *flag.Flag) {
			fmt.Fprintf(fs.Output(), "  --%s [%s]\n    \t%s (default %q)\n", fl.Name, envName(fl.Name), fl.Usage, fl.DefValue)
		})
	}
	return f
}

// envName is the environment variable of a flag: --max-continuations is
// TURNSTILE_MAX_CONTINUATIONS.
func envName(flagName string) string {
	return "TURNSTILE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parse applies the environment, then the command line.
func (f *flagSet) parse(args []string) error {
	var err error
	f.VisitAll(func(fl *flag.Flag) {
		if v := f.env.getenv(envName(fl.Name)); v != "" && err == nil {
			if e := f.Set(fl.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", envName(fl.Name), v, e)
			}
		}
	})
	if err != nil {
		return err
	}
	return f.Parse(args)
}
