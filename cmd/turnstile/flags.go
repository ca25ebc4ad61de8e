package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// flagSet is a command's flags, each of which can also come from a
// TURNSTILE_* environment variable; a flag on the command line wins.
//
// --help (or -h) prints the usage on standard output and parse returns
// flag.ErrHelp, which main takes for success; a flag that does not parse
// prints the usage on standard error and parse returns the error.
type flagSet struct {
	*flag.FlagSet
	env env
	// usage writes the command's usage; config wraps it to name its
	// operands.
	usage func(w io.Writer)
}

func newFlagSet(name string, e env) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package prints its error and the usage to the same place;
	// parse prints the usage itself, to stdout for --help and to stderr
	// for a mistake, and the error travels up to main.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	f := &flagSet{FlagSet: fs, env: e}
	f.usage = func(w io.Writer) {
		fmt.Fprintf(w, "Usage: turnstile %s [flags]\n\n", name)
		f.printFlags(w)
	}
	return f
}

// printFlags lists the flags with their environment variables and
// defaults.
func (f *flagSet) printFlags(w io.Writer) {
	fmt.Fprintln(w, "Flags (environment variable in brackets):")
	f.VisitAll(func(fl *flag.Flag) {
		fmt.Fprintf(w, "  --%s [%s]\n    \t%s (default %q)\n", fl.Name, envName(fl.Name), fl.Usage, fl.DefValue)
	})
}

// envName is the environment variable of a flag: --max-continuations is
// TURNSTILE_MAX_CONTINUATIONS. Every one starts with runtime.EnvPrefix,
// which no configuration may read (runtime.CheckEnvName): a flag's value,
// the DSN's password say, never leaves the process through one.
func envName(flagName string) string {
	return runtime.EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
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
	return f.parseArgs(args)
}

// parseArgs parses command-line flags alone, printing the usage for
// --help and after a mistake.
func (f *flagSet) parseArgs(args []string) error {
	err := f.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		f.usage(f.env.stdout)
	case err != nil:
		f.usage(f.env.stderr)
	}
	return err
}

// Duration defines a duration flag that, unlike the flag package's,
// explains a number given without a unit.
func (f *flagSet) Duration(name string, value time.Duration, usage string) *time.Duration {
	p := new(time.Duration)
	f.DurationVar(p, name, value, usage)
	return p
}

// DurationVar is Duration into p.
func (f *flagSet) DurationVar(p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	f.Var((*durationValue)(p), name, usage)
}

// durationValue is a flag.Value reading time.ParseDuration's syntax.
type durationValue time.Duration

func (d *durationValue) String() string { return (*time.Duration)(d).String() }

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		if _, numErr := strconv.ParseFloat(s, 64); numErr == nil {
			return fmt.Errorf("a duration needs a unit, such as %ss", s)
		}
		return fmt.Errorf("%q is not a duration, such as 10s, 1m30s or 2h", s)
	}
	*d = durationValue(v)
	return nil
}

// autoBool is a boolean flag whose default depends on other flags: it
// shows as "auto" until it is given (on the command line or in the
// environment), and the command then decides it with or.
type autoBool struct{ set, value bool }

func (b *autoBool) IsBoolFlag() bool { return true }

func (b *autoBool) String() string {
	if b == nil || !b.set {
		return "auto"
	}
	return strconv.FormatBool(b.value)
}

func (b *autoBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%q is not true or false", s)
	}
	b.set, b.value = true, v
	return nil
}

// or is the value given, else def.
func (b *autoBool) or(def bool) bool {
	if b.set {
		return b.value
	}
	return def
}
