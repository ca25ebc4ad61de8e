package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// binary is the turnstile command built once for every test of the
// package that runs it as a process.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "turnstile-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve_test:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "turnstile")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "serve_test: go build:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	stopGalera()
	os.RemoveAll(dir)
	os.Exit(code)
}

// childEnv is this process's environment without any TURNSTILE_* variable,
// plus extra: a child sees only the configuration its test gives it.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TURNSTILE_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// syncBuffer collects a child's output while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// result is how a command that ran to its end went.
type result struct {
	code           int
	stdout, stderr string
}

// runBinary runs the command to its end, within a minute.
func runBinary(t *testing.T, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("turnstile %s: %v", strings.Join(args, " "), err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// server is a turnstile child process: serve, or work.
type server struct {
	cmd            *exec.Cmd
	addr           string
	stdout, stderr *syncBuffer
	done           chan struct{} // closed when the process has exited
	waitErr        error         // set before done is closed
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// startServer starts "turnstile serve" with args and env and waits until
// /readyz on addr answers 200. The process is killed when the test ends if
// the test did not stop it.
func startServer(t *testing.T, addr string, env []string, args ...string) *server {
	t.Helper()
	s := startChild(t, env, append([]string{"serve"}, args...)...)
	s.addr = addr
	s.waitReady(t, 30*time.Second)
	return s
}

// startChild starts the binary with args and env, and kills it when the
// test ends if the test did not stop it.
func startChild(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	s := &server{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(binary, args...)
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start turnstile %s: %v", args[0], err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

// waitReady polls GET /readyz until it answers 200, the process exits, or
// the deadline passes.
func (s *server) waitReady(t *testing.T, within time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			t.Fatalf("turnstile serve exited before it was ready (%v); stderr:\n%s", s.waitErr, s.stderr)
		default:
		}
		resp, err := client.Get("http://" + s.addr + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("GET /readyz on %s did not answer 200 within %s (last: %s); stderr:\n%s", s.addr, within, last, s.stderr)
}

// stop sends SIGTERM and asserts a clean exit within 10 seconds.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("turnstile serve did not exit within 10s of SIGTERM; stderr:\n%s", s.stderr)
	}
	if got := s.cmd.ProcessState.ExitCode(); got != 0 {
		t.Errorf("exit status after SIGTERM = %d (%v), want 0; stderr:\n%s", got, s.waitErr, s.stderr)
	}
}

// logLines parses every stderr line as a slog JSON record.
func (s *server) logLines(t *testing.T) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.stderr.String()))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("stderr line %q is not a JSON object: %v", sc.Text(), err)
			continue
		}
		if _, ok := rec["level"].(string); !ok {
			t.Errorf("stderr line %s has no level", sc.Text())
		}
		if _, ok := rec["msg"].(string); !ok {
			t.Errorf("stderr line %s has no msg", sc.Text())
		}
		lines = append(lines, rec)
	}
	return lines
}

// logged reports whether a record with this msg (and attrs) was logged.
func logged(lines []map[string]any, msg string, attrs map[string]any) bool {
next:
	for _, l := range lines {
		if l["msg"] != msg {
			continue
		}
		for k, v := range attrs {
			if l[k] != v {
				continue next
			}
		}
		return true
	}
	return false
}

// seeded is what the demo seed left in a database.
type seeded struct {
	configurations []string
	users          []string
	runs           map[string]string // configuration identifier → run status
	runCount       int
}

func readSeed(t *testing.T, db *sqlx.DB) seeded {
	t.Helper()
	ctx := context.Background()
	var s seeded
	if err := db.SelectContext(ctx, &s.configurations, `SELECT identifier FROM configurations ORDER BY identifier`); err != nil {
		t.Fatal(err)
	}
	if err := db.SelectContext(ctx, &s.users, `SELECT name FROM users ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	var runs []struct {
		Identifier string `db:"identifier"`
		Status     string `db:"status"`
	}
	if err := db.SelectContext(ctx, &runs, `
		SELECT c.identifier, r.status FROM runs r JOIN configurations c ON c.id = r.configuration_id
		ORDER BY r.id`); err != nil {
		t.Fatal(err)
	}
	s.runCount = len(runs)
	s.runs = map[string]string{}
	for _, r := range runs {
		s.runs[r.Identifier] = r.Status
	}
	return s
}

func checkSeed(t *testing.T, got seeded) {
	t.Helper()
	wantConfigs := []string{"input-agent", "orders-agent", "refund-agent", "refund-agent-four-eyes", "slow-agent"}
	if !reflect.DeepEqual(got.configurations, wantConfigs) {
		t.Errorf("configurations = %q, want %q", got.configurations, wantConfigs)
	}
	wantUsers := []string{"admin", "operator", "user"}
	if !reflect.DeepEqual(got.users, wantUsers) {
		t.Errorf("users = %q, want %q", got.users, wantUsers)
	}
	wantRuns := map[string]string{
		"refund-agent":           "waiting_for_approval",
		"refund-agent-four-eyes": "waiting_for_approval",
		"input-agent":            "waiting_for_input",
		"slow-agent":             "waiting_for_approval",
	}
	if got.runCount != len(wantRuns) || !reflect.DeepEqual(got.runs, wantRuns) {
		t.Errorf("%d runs with statuses %v, want %d: %v", got.runCount, got.runs, len(wantRuns), wantRuns)
	}
}

func TestServeDemoSeedsOnceAndShutsDownCleanly(t *testing.T) {
	db, dsn := dbtest.New(t)
	env := childEnv()

	addr := freeAddr(t)
	first := startServer(t, addr, env, "--addr", addr, "--dsn", dsn, "--demo")
	checkSeed(t, readSeed(t, db))
	if got, want := first.stdout.String(), "demo: 4 runs are waiting for a decision"; !strings.Contains(got, want) {
		t.Errorf("stdout = %q, want it to contain %q", got, want)
	}
	first.stop(t)
	lines := first.logLines(t)
	if !logged(lines, "serving", map[string]any{"level": "INFO", "addr": addr}) {
		t.Errorf("no INFO \"serving\" record with addr %s in stderr:\n%s", addr, first.stderr)
	}
	if !logged(lines, "shutting down", nil) {
		t.Errorf("no \"shutting down\" record in stderr:\n%s", first.stderr)
	}
	// The demo's notifications may go to a receiver on this machine.
	if !logged(lines, allowPrivateLog, nil) {
		t.Errorf("serve --demo did not allow private webhook targets; stderr:\n%s", first.stderr)
	}

	// A restart keeps what the first run left and seeds no second set.
	addr = freeAddr(t)
	second := startServer(t, addr, env, "--addr", addr, "--dsn", dsn, "--demo")
	checkSeed(t, readSeed(t, db))
	if got := second.stdout.String(); strings.Contains(got, "runs are waiting") {
		t.Errorf("second start stdout = %q, want no new demo runs", got)
	}
	second.stop(t)
	second.logLines(t)
}

func TestServeTakesItsFlagsFromTheEnvironment(t *testing.T) {
	db, dsn := dbtest.New(t)
	addr := freeAddr(t)
	s := startServer(t, addr, childEnv("TURNSTILE_ADDR="+addr, "TURNSTILE_DSN="+dsn, "TURNSTILE_DEMO=1"))
	got := readSeed(t, db)
	if len(got.configurations) != 5 || got.runCount != 4 {
		t.Errorf("TURNSTILE_DEMO=1 seeded %d configurations and %d runs, want 5 and 4", len(got.configurations), got.runCount)
	}
	s.stop(t)
	if !logged(s.logLines(t), "serving", map[string]any{"addr": addr}) {
		t.Errorf("no \"serving\" record with addr %s in stderr:\n%s", addr, s.stderr)
	}
}

func TestServeWithoutDemoSeedsNothing(t *testing.T) {
	db, dsn := dbtest.New(t)
	addr := freeAddr(t)
	s := startServer(t, addr, childEnv(), "--addr", addr, "--dsn", dsn)
	got := readSeed(t, db)
	if len(got.configurations) != 0 || len(got.users) != 0 || got.runCount != 0 {
		t.Errorf("serve without --demo left %v", got)
	}
	s.stop(t)
	if logged(s.logLines(t), allowPrivateLog, nil) {
		t.Errorf("serve without --demo or --webhook-allow-private allows private webhook targets")
	}
}

// allowPrivateLog is what serve and work log at start with
// --webhook-allow-private.
const allowPrivateLog = "notifications may reach private addresses and this host (--webhook-allow-private)"

// emptyDatabase creates a database with no tables, dropped when the test
// ends, and returns its DSN.
func emptyDatabase(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := mysql.ParseDSN(dbtest.ServerDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = ""
	admin, err := store.Open(ctx, cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	name := fmt.Sprintf("turnstile_test_empty_%d", time.Now().UnixNano())
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

func TestMigrateAppliesEveryMigration(t *testing.T) {
	dsn := emptyDatabase(t)
	got := runBinary(t, childEnv(), "migrate", "--dsn", dsn)
	if got.code != 0 || !strings.Contains(got.stdout, "migrations applied") {
		t.Fatalf("turnstile migrate = exit %d, stdout %q, stderr %q; want exit 0 and \"migrations applied\"", got.code, got.stdout, got.stderr)
	}
	ctx := context.Background()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := store.New(db).Ready(ctx); err != nil {
		t.Errorf("after turnstile migrate, Ready = %v, want nil", err)
	}

	// Again on a migrated database: nothing to do, still a success.
	if again := runBinary(t, childEnv("TURNSTILE_DSN="+dsn), "migrate"); again.code != 0 || !strings.Contains(again.stdout, "migrations applied") {
		t.Errorf("second turnstile migrate = exit %d, stdout %q, stderr %q; want exit 0", again.code, again.stdout, again.stderr)
	}
}

// TestCommandLineFailures runs the binary. migrate without a DSN is not
// here: on a machine where make run's database answers it migrates that
// (see TestCommandsFindTheDatabaseMakeRunUses).
func TestCommandLineFailures(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        []string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{"serve without a dsn", []string{"serve", "--addr", "127.0.0.1:0"}, nil, 1, nil,
			[]string{"turnstile: no database: set --dsn or TURNSTILE_DSN, e.g. TURNSTILE_DSN='root@tcp(127.0.0.1:3306)/turnstile'"}},
		{"unknown command", []string{"bogus"}, nil, 1, nil, []string{`unknown command "bogus"`, "Usage: turnstile <command>"}},
		{"no command", nil, nil, 1, nil, []string{"no command given"}},
		{"unknown flag", []string{"serve", "--bogus"}, nil, 1, nil, []string{"turnstile: flag provided but not defined: -bogus", "Usage: turnstile serve"}},
		{"duration without a unit", []string{"serve", "--keepalive", "10"}, nil, 1, nil,
			[]string{`turnstile: invalid value "10" for flag -keepalive: a duration needs a unit, such as 10s`}},
		{"duration without a unit from the environment", []string{"serve"}, []string{"TURNSTILE_KEEPALIVE=10"}, 1, nil,
			[]string{`turnstile: TURNSTILE_KEEPALIVE="10": a duration needs a unit, such as 10s`}},
		{"serve help", []string{"serve", "--help"}, nil, 0,
			[]string{"--addr [TURNSTILE_ADDR]", "--dsn [TURNSTILE_DSN]", "--demo [TURNSTILE_DEMO]", "--access-log [TURNSTILE_ACCESS_LOG]"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runBinary(t, childEnv(tt.env...), tt.args...)
			if got.code != tt.wantCode {
				t.Errorf("turnstile %s exit status = %d, want %d; stderr:\n%s", strings.Join(tt.args, " "), got.code, tt.wantCode, got.stderr)
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(got.stdout, want) {
					t.Errorf("turnstile %s stdout = %q, want it to contain %q", strings.Join(tt.args, " "), got.stdout, want)
				}
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(got.stderr, want) {
					t.Errorf("turnstile %s stderr = %q, want it to contain %q", strings.Join(tt.args, " "), got.stderr, want)
				}
			}
		})
	}
}

// TestRun covers run's cheap answers in process.
func TestRun(t *testing.T) {
	noEnv := func(string) string { return "" }
	tests := []struct {
		name       string
		args       []string
		getenv     func(string) string
		wantErr    error  // matched with errors.Is when set
		wantErrMsg string // contained in the error when set
		wantStdout string
		wantStderr string
	}{
		{name: "help", args: []string{"help"}, getenv: noEnv, wantStdout: "Usage: turnstile <command>"},
		{name: "--help", args: []string{"--help"}, getenv: noEnv, wantStdout: "migrate"},
		{name: "serve --help", args: []string{"serve", "--help"}, getenv: noEnv, wantErr: flag.ErrHelp,
			wantStdout: "--shutdown-timeout [TURNSTILE_SHUTDOWN_TIMEOUT]"},
		{name: "no dsn", args: []string{"serve"}, getenv: noEnv, wantErrMsg: "TURNSTILE_DSN"},
		{name: "bad log level", args: []string{"serve", "--log-level", "loud"}, getenv: noEnv, wantErrMsg: "--log-level"},
		{name: "bad environment value", args: []string{"serve"},
			getenv:     func(k string) string { return map[string]string{"TURNSTILE_DEMO": "maybe"}[k] },
			wantErrMsg: `TURNSTILE_DEMO="maybe"`},
		{name: "unknown command", args: []string{"bogus"}, getenv: noEnv, wantErrMsg: `unknown command "bogus"`,
			wantStderr: "Usage: turnstile <command>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tt.args, tt.getenv, strings.NewReader(""), &stdout, &stderr)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("run(%q) = %v, want %v", tt.args, err, tt.wantErr)
				}
			case tt.wantErrMsg != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErrMsg) {
					t.Errorf("run(%q) = %v, want an error containing %q", tt.args, err, tt.wantErrMsg)
				}
			default:
				if err != nil {
					t.Errorf("run(%q) = %v, want nil", tt.args, err)
				}
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tt.wantStdout)
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
}

// TestFlagBeatsEnvironment: the environment sets a default, the command
// line overrides it.
func TestFlagBeatsEnvironment(t *testing.T) {
	getenv := func(k string) string {
		return map[string]string{"TURNSTILE_ADDR": "127.0.0.1:7000", "TURNSTILE_SHUTDOWN_TIMEOUT": "3s"}[k]
	}
	fs := newFlagSet("serve", env{getenv: getenv, stderr: io.Discard})
	addr := fs.String("addr", "127.0.0.1:8080", "")
	timeout := fs.Duration("shutdown-timeout", time.Second, "")
	if err := fs.parse([]string{"--addr", "127.0.0.1:9000"}); err != nil {
		t.Fatal(err)
	}
	if *addr != "127.0.0.1:9000" {
		t.Errorf("addr = %s, want the flag's 127.0.0.1:9000 over TURNSTILE_ADDR", *addr)
	}
	if *timeout != 3*time.Second {
		t.Errorf("shutdown-timeout = %s, want TURNSTILE_SHUTDOWN_TIMEOUT's 3s", *timeout)
	}
}
