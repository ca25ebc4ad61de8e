package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// TestHelpOfEveryCommand: --help, -h and "help" of every command and
// subcommand print the usage on standard output and exit 0, with nothing
// on standard error (no "turnstile: usage: …" error).
func TestHelpOfEveryCommand(t *testing.T) {
	tests := []struct {
		args []string
		want string // the start of standard output
	}{
		{[]string{"--help"}, "Turnstile serves LLM agent runs"},
		{[]string{"-h"}, "Turnstile serves LLM agent runs"},
		{[]string{"help"}, "Turnstile serves LLM agent runs"},
		{[]string{"help", "serve"}, "Usage: turnstile serve [flags]"},
		{[]string{"serve", "--help"}, "Usage: turnstile serve [flags]"},
		{[]string{"serve", "-h"}, "Usage: turnstile serve [flags]"},
		{[]string{"work", "--help"}, "Usage: turnstile work [flags]"},
		{[]string{"migrate", "--help"}, "Usage: turnstile migrate [flags]"},
		{[]string{"user", "--help"}, "Usage: turnstile user add"},
		{[]string{"user", "help"}, "Usage: turnstile user add"},
		{[]string{"user", "add", "--help"}, "Usage: turnstile user add [flags]"},
		{[]string{"user", "list", "--help"}, "Usage: turnstile user list [flags]"},
		{[]string{"user", "delete", "--help"}, "Usage: turnstile user delete [flags]"},
		{[]string{"token", "--help"}, "Usage: turnstile token create"},
		{[]string{"token", "create", "--help"}, "Usage: turnstile token create [flags]"},
		{[]string{"token", "revoke", "--help"}, "Usage: turnstile token revoke [flags]"},
		{[]string{"token", "list", "--help"}, "Usage: turnstile token list [flags]"},
		{[]string{"config", "--help"}, "Usage: turnstile config apply FILE.yaml"},
		{[]string{"config", "apply", "--help"}, "Usage: turnstile config apply FILE.yaml"},
		{[]string{"config", "list", "--help"}, "Usage: turnstile config apply FILE.yaml"},
		{[]string{"config", "export", "--help"}, "Usage: turnstile config apply FILE.yaml"},
		{[]string{"webhooks", "--help"}, "Usage: turnstile webhooks list"},
		{[]string{"webhooks", "list", "--help"}, "Usage: turnstile webhooks list [flags]"},
		{[]string{"webhooks", "retry", "--help"}, "Usage: turnstile webhooks retry [flags]"},
		{[]string{"state", "--help"}, "Usage: turnstile state reseal"},
		{[]string{"state", "reseal", "--help"}, "Usage: turnstile state reseal [flags]"},
		{[]string{"demo", "--help"}, "Usage: turnstile demo reset"},
		{[]string{"demo", "reset", "--help"}, "Usage: turnstile demo reset [flags]"},
		{[]string{"version", "--help"}, "Usage: turnstile version"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			got := runBinary(t, childEnv(), tt.args...)
			if got.code != 0 || got.stderr != "" || !strings.HasPrefix(got.stdout, tt.want) {
				t.Errorf("turnstile %s = exit %d, stdout %q, stderr %q; want exit 0, stdout starting %q, no stderr",
					strings.Join(tt.args, " "), got.code, got.stdout, got.stderr, tt.want)
			}
		})
	}
	// A subcommand's --help lists only the flags it reads.
	if got := runBinary(t, childEnv(), "user", "list", "--help"); strings.Contains(got.stdout, "--role") {
		t.Errorf("user list --help lists --role:\n%s", got.stdout)
	}
}

// TestDurationWithoutAUnit: every duration flag, on the command line or
// from the environment, says what a bare number lacks.
func TestDurationWithoutAUnit(t *testing.T) {
	const want = "a duration needs a unit, such as 10s"
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"serve --keepalive", []string{"serve", "--keepalive", "10"}, nil},
		{"serve --lease", []string{"serve", "--lease=10"}, nil},
		{"serve --shutdown-timeout", []string{"serve", "--shutdown-timeout", "10"}, nil},
		{"work --shutdown-timeout", []string{"work", "--shutdown-timeout", "10"}, nil},
		{"work --lease", []string{"work", "--lease", "10"}, nil},
		{"token create --ttl", []string{"token", "create", "--ttl", "10"}, nil},
		{"TURNSTILE_KEEPALIVE", []string{"serve"}, map[string]string{"TURNSTILE_KEEPALIVE": "10"}},
		{"TURNSTILE_LEASE", []string{"work"}, map[string]string{"TURNSTILE_LEASE": "10"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, func(k string) string { return tt.env[k] }, strings.NewReader(""), &stdout, &stderr)
			if err == nil || !strings.HasSuffix(err.Error(), want) {
				t.Errorf("turnstile %s = %v, want an error ending %q", strings.Join(tt.args, " "), err, want)
			}
		})
	}
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"serve", "--keepalive", "1.5"}, func(string) string { return "" }, strings.NewReader(""), &bytes.Buffer{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), "a duration needs a unit, such as 1.5s") {
		t.Errorf("--keepalive 1.5 = %v, want the unit message with 1.5s", err)
	}
	err = run(context.Background(), []string{"serve", "--keepalive", "soon"}, func(string) string { return "" }, strings.NewReader(""), &bytes.Buffer{}, &stderr)
	if err == nil || !strings.Contains(err.Error(), `"soon" is not a duration, such as 10s`) {
		t.Errorf("--keepalive soon = %v, want a message naming the syntax", err)
	}
	// What does parse keeps working: 2s from the environment, 90s and the
	// default printed as before.
	fs := newFlagSet("serve", env{getenv: func(k string) string { return map[string]string{"TURNSTILE_KEEPALIVE": "2s"}[k] }, stderr: &stderr})
	keepalive := fs.Duration("keepalive", 10e9, "")
	lease := fs.Duration("lease", 30e9, "")
	if err := fs.parse([]string{"--lease", "1m30s"}); err != nil || keepalive.String() != "2s" || lease.String() != "1m30s" {
		t.Errorf("parse = %v, keepalive %s, lease %s; want 2s and 1m30s", err, keepalive, lease)
	}
	if def := fs.Lookup("keepalive").DefValue; def != "10s" {
		t.Errorf("keepalive's default prints as %q, want 10s", def)
	}
}

// TestVersion: version and --version print the module version, the VCS
// revision the binary was built from (as `go version -m` reads it) and the
// Go version, and exit 0.
func TestVersion(t *testing.T) {
	want := []string{"turnstile ", goruntime.Version()}
	if out, err := exec.Command("go", "version", "-m", binary).Output(); err == nil {
		if m := regexp.MustCompile(`(?m)^\s+build\s+vcs\.revision=(\S+)$`).FindSubmatch(out); m != nil {
			want = append(want, "revision "+string(m[1]))
		}
		if bytes.Contains(out, []byte("vcs.modified=true")) {
			want = append(want, "(modified)")
		}
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		got := runBinary(t, childEnv(), args...)
		if got.code != 0 || got.stderr != "" {
			t.Errorf("turnstile %s = exit %d, stderr %q; want exit 0", args[0], got.code, got.stderr)
		}
		for _, w := range want {
			if !strings.Contains(got.stdout, w) {
				t.Errorf("turnstile %s = %q, want it to contain %q", args[0], got.stdout, w)
			}
		}
	}
	if got := runBinary(t, childEnv(), "version", "extra"); got.code == 0 {
		t.Errorf("turnstile version extra = exit 0, want a failure")
	}

	info := &debug.BuildInfo{GoVersion: "go1.99.0", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2025-06-01T10:00:00Z"}}}
	wantLine := "turnstile v1.2.3, revision 0123456789abcdef (modified), committed 2025-06-01T10:00:00Z, go1.99.0 " + goruntime.GOOS + "/" + goruntime.GOARCH
	if got := versionLine(info); got != wantLine {
		t.Errorf("versionLine = %q, want %q", got, wantLine)
	}
	if got := versionLine(nil); !strings.Contains(got, "no VCS revision recorded") || !strings.Contains(got, goruntime.Version()) {
		t.Errorf("versionLine(nil) = %q", got)
	}
}

// TestCommandsFindTheDatabaseMakeRunUses: without --dsn and TURNSTILE_DSN
// the commands other than serve and work take the first local database
// that answers and say which; when none does, the error says what to set.
// serve and work never guess.
func TestCommandsFindTheDatabaseMakeRunUses(t *testing.T) {
	_, dsn := dbtest.New(t)
	ctx := context.Background()
	noEnv := func(string) string { return "" }
	const nothing = "root@tcp(127.0.0.1:1)/turnstile" // no server listens on port 1
	const hint = "no database: set --dsn or TURNSTILE_DSN, e.g. TURNSTILE_DSN='root@tcp(127.0.0.1:3306)/turnstile', the database make run uses"

	var stdout, stderr bytes.Buffer
	e := env{getenv: noEnv, stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr,
		localDSNs: func() []string { return []string{nothing, dsn} }}
	if err := migrate(ctx, nil, e); err != nil {
		t.Fatalf("migrate with a local database = %v (stderr %q)", err, stderr.String())
	}
	if want := "turnstile: no --dsn or TURNSTILE_DSN given; using " + dsn + ", the database make run uses\n"; !strings.HasPrefix(stderr.String(), want) {
		t.Errorf("stderr = %q, want it to start %q", stderr.String(), want)
	}
	if !strings.Contains(stdout.String(), "migrations applied") {
		t.Errorf("stdout = %q, want migrations applied", stdout.String())
	}

	e.localDSNs = func() []string { return []string{nothing} }
	for _, args := range [][]string{{"list"}, {"add", "--name", "ada"}} {
		err := user(ctx, args, e)
		if err == nil || !strings.HasPrefix(err.Error(), hint+"; tried "+nothing+": ") {
			t.Errorf("user %s without a database = %v, want an error starting %q", args[0], err, hint)
		}
	}
	err := migrate(ctx, nil, e)
	if err == nil || !strings.HasPrefix(err.Error(), hint) {
		t.Errorf("migrate without a database = %v, want %q", err, hint)
	}

	// serve and work never try the local databases: one that answers is no
	// reason to serve it.
	e.localDSNs = func() []string { return []string{dsn} }
	for _, command := range []func(context.Context, []string, env) error{serve, work} {
		err := command(ctx, nil, e)
		if want := hint + " (make run and make test find or start one)"; err == nil || err.Error() != want {
			t.Errorf("serve/work without a dsn = %v, want %q", err, want)
		}
	}
}

// TestHelpIsNoError: in process, help is nil or flag.ErrHelp (both exit
// 0), printed on stdout.
func TestHelpIsNoError(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"user", "--help"}, {"serve", "--help"}, {"demo", "reset", "-h"}} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &stdout, &stderr)
		if (err != nil && !errors.Is(err, flag.ErrHelp)) || stdout.Len() == 0 || stderr.Len() != 0 {
			t.Errorf("run(%q) = %v, stdout %d bytes, stderr %q; want help on stdout", args, err, stdout.Len(), stderr.String())
		}
	}
}
