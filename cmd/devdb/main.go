// Command devdb prints on stdout one line, the DSN (without a database name)
// of a MySQL or MariaDB server for development and CI, so that `make run` and
// `make test` work on any machine with a server package: TURNSTILE_DSN, else
// a server answering as root with no password on 127.0.0.1:3306, else a
// private instance it starts under ./var/mysql. Progress goes to stderr only.
//
//	go run ./cmd/devdb                      # DSN of the server
//	go run ./cmd/devdb -database turnstile  # DSN of that database, created if missing
//	go run ./cmd/devdb -stop                # stop the private instance
//
// TURNSTILE_DEVDB_SKIP_TCP=1 skips the 127.0.0.1:3306 probe; it exists only
// to exercise the private instance on machines where 3306 answers.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

const defaultDSN = "root@tcp(127.0.0.1:3306)/"

func main() {
	database := flag.String("database", "", "print the DSN of this database, creating it if missing")
	stop := flag.Bool("stop", false, "stop the private instance under ./var/mysql")
	flag.Parse()
	if err := run(*database, *stop); err != nil {
		fmt.Fprintln(os.Stderr, "turnstile:", err)
		os.Exit(1)
	}
}

func run(database string, stop bool) error {
	dir, err := filepath.Abs(filepath.Join("var", "mysql"))
	if err != nil {
		return err
	}
	if stop {
		return stopPrivate(dir)
	}
	dsn, err := findServer(dir)
	if err == nil && database != "" {
		dsn, err = createDatabase(dsn, database)
	}
	if err == nil {
		fmt.Println(dsn)
	}
	return err
}

func findServer(dir string) (string, error) {
	if dsn := os.Getenv("TURNSTILE_DSN"); dsn != "" {
		return dsn, nil
	}
	if os.Getenv("TURNSTILE_DEVDB_SKIP_TCP") == "" && ping(defaultDSN) == nil {
		return defaultDSN, nil
	}
	dsn := "root@unix(" + filepath.Join(dir, "sock") + ")/"
	if ping(dsn) == nil {
		return dsn, nil
	}
	server, mariadb := findBinary()
	if server == "" {
		return "", errors.New("no MySQL answers on 127.0.0.1:3306 and no MariaDB/MySQL server is installed; install one with: sudo apt-get install mariadb-server (or set TURNSTILE_DSN)")
	}
	return dsn, startPrivate(dir, server, mariadb, dsn)
}

// open reaches dsn's server, not its database (which may not exist yet), with
// a short timeout so that probing a missing server costs only a moment.
func open(dsn string) (*sql.DB, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse DSN: %w", err)
	}
	cfg.DBName, cfg.Timeout = "", 2*time.Second
	return sql.Open("mysql", cfg.FormatDSN())
}

func ping(dsn string) error {
	db, err := open(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// findBinary looks beyond PATH because /usr/sbin is often missing from a
// developer's PATH and tarball installs live in /usr/local/mysql/bin.
func findBinary() (path string, mariadb bool) {
	for _, name := range []string{"mariadbd", "mysqld"} {
		if p := lookPath(name, "/usr/sbin", "/usr/libexec", "/usr/local/mysql/bin"); p != "" {
			// Debian's mysqld is MariaDB's old name; the two initialise differently.
			out, _ := exec.Command(p, "--version").Output()
			return p, name == "mariadbd" || strings.Contains(string(out), "MariaDB")
		}
	}
	return "", false
}

func lookPath(name string, dirs ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// initialise creates the data directory. The marker file is written only
// after success, so an interrupted initialisation is redone from scratch
// rather than leaving a data directory the server cannot start on.
func initialise(dir, server string, mariadb bool, osUser string) error {
	data, marker := filepath.Join(dir, "data"), filepath.Join(dir, "initialized")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	fmt.Fprintf(os.Stderr, "devdb: initialising a private server in %s\n", data)
	os.RemoveAll(data) // left by an interrupted run, if any; MkdirAll reports real trouble
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "tmp") // see startPrivate
	init := exec.Command(server, "--no-defaults", "--initialize-insecure", "--datadir="+data, "--tmpdir="+tmp, "--user="+osUser)
	if mariadb {
		init = exec.Command("mariadb-install-db", "--no-defaults", "--auth-root-authentication-method=normal",
			"--datadir="+data, "--tmpdir="+tmp, "--user="+osUser, "--skip-test-db")
	}
	if out, err := init.CombinedOutput(); err != nil {
		return fmt.Errorf("initialise %s: %w\n%s", data, err, out)
	}
	return os.WriteFile(marker, nil, 0o644)
}

func startPrivate(dir, server string, mariadb bool, dsn string) error {
	u, err := user.Current()
	if err != nil {
		return err
	}
	// A tmpdir of its own, for the installation and every start: a MariaDB
	// server deletes at start every "#sql" file in its tmpdir, which in
	// /tmp are the live temporary tables of the other servers on the
	// machine.
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return err
	}
	if err := initialise(dir, server, mariadb, u.Username); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port, so that tcp DSNs work too
	if err != nil {
		return err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logFile, err := os.OpenFile(filepath.Join(dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	logPath := logFile.Name()
	// utf8mb4 because MariaDB's built-in default is latin1; "loose" because
	// only MySQL has the X plugin, which would otherwise claim port 33060.
	cmd := exec.Command(server, "--no-defaults", "--datadir="+filepath.Join(dir, "data"), "--tmpdir="+filepath.Join(dir, "tmp"),
		"--socket="+filepath.Join(dir, "sock"), "--port="+strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--user="+u.Username, "--pid-file="+filepath.Join(dir, "pid"),
		"--character-set-server=utf8mb4", "--loose-mysqlx=OFF")
	// Its own session keeps the server alive after `go run` and make exit and
	// out of reach of a Ctrl-C meant for them; its output goes to the log so
	// that `$(go run ./cmd/devdb)` does not wait on the server's stdout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	fmt.Fprintf(os.Stderr, "devdb: starting %s (port %d, log %s)\n", server, port, logPath)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", server, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		select {
		case err := <-exited:
			return fmt.Errorf("%s exited during start (%v); see %s", server, err, logPath)
		case <-time.After(250 * time.Millisecond):
		}
		if ping(dsn) == nil {
			fmt.Fprintln(os.Stderr, "devdb: private server ready; stop it with: go run ./cmd/devdb -stop")
			return nil
		}
	}
	return fmt.Errorf("%s did not answer within 60s; see %s", server, logPath)
}

func stopPrivate(dir string) error {
	pidPath := filepath.Join(dir, "pid")
	b, err := os.ReadFile(pidPath)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	// After a crash the pid may name another program: signal only our server.
	cmdline, procErr := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || pid <= 0 || syscall.Kill(pid, 0) != nil || (procErr == nil && !strings.Contains(string(cmdline), dir)) {
		fmt.Fprintln(os.Stderr, "devdb: no private server is running")
		os.Remove(pidPath) // stale, if there at all
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stop pid %d: %w", pid, err)
	}
	for i := 0; syscall.Kill(pid, 0) == nil; i++ {
		// A zombie, under a PID 1 that reaps nothing, has released everything.
		if stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(stat), ") Z ") {
			break
		}
		if i == 240 {
			return fmt.Errorf("pid %d still running 60s after SIGTERM", pid)
		}
		time.Sleep(250 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "devdb: private server stopped")
	return nil
}

// createDatabase returns dsn naming database name, created if missing.
func createDatabase(dsn, name string) (string, error) {
	db, err := open(dsn)
	if err != nil {
		return "", err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	quoted := "`" + strings.ReplaceAll(name, "`", "``") + "`"
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS "+quoted); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	cfg, _ := mysql.ParseDSN(dsn) // open has parsed it already
	cfg.DBName = name
	return cfg.FormatDSN(), nil
}
