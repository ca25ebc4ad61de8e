package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/testrig"
	"github.com/turnstile-dev/turnstile/web"
)

// testLease is the lease of every process these tests start, so that a
// worker recovers a dead holder's run within seconds.
const testLease = 2 * time.Second

// testPassword is the password of the rig's users.
const testPassword = "durable-test-password"

// pacedYAML is a configuration that pauses at once on refund_order (whose
// payment provider takes processing seconds when positive), then, once
// approved, runs checks rounds of delay each (a lookup_order call apiece)
// and a last round of delay with the answer. A continuation records
// 2 + 2*checks + 2 steps: approval, refund, each check's round and lookup,
// the last round and the settle.
func pacedYAML(identifier string, checks int, delay time.Duration, processing float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "identifier: %s\nname: %s\nprovider:\n  type: scripted\n  script:\n    rounds:\n", identifier, identifier)
	args := `{order_id: "${order_id}", reason: "paced"}`
	if processing > 0 {
		args = fmt.Sprintf(`{order_id: "${order_id}", reason: "paced", processing_seconds: %g}`, processing)
	}
	fmt.Fprintf(&b, "      - text: \"Refunding.\"\n        tool_calls:\n          - name: refund_order\n            arguments: %s\n", args)
	for i := 1; i <= checks; i++ {
		fmt.Fprintf(&b, "      - delay: %s\n        text: \"Check %d.\"\n        tool_calls:\n          - name: lookup_order\n            arguments: {order_id: \"${order_id}\"}\n", delay, i)
	}
	fmt.Fprintf(&b, "      - delay: %s\n        text: \"Done.\"\n", delay)
	fmt.Fprintf(&b, "tools: [lookup_order, refund_order]\nmax_iterations: %d\nprivacy_level: metadata\n", checks+3)
	return b.String()
}

// rig is one test's world (store/testrig) with its configurations, the
// operator (who holds the approve grant and decides the runs) beside its
// owner, every user's password testPassword, and an engine of the test's
// own that starts runs in it.
type rig struct {
	*testrig.World
	owner, operator runtime.Actor
}

// newRig gives the test a database of its own (store/dbtest) with the
// configurations in it.
func newRig(t *testing.T, yamls ...string) *rig {
	t.Helper()
	return newRigWith(t, testrig.Configs(yamls...))
}

// newRigOn sets the rig up on a migrated database.
func newRigOn(t *testing.T, db *sqlx.DB, dsn string, yamls ...string) *rig {
	t.Helper()
	return newRigWith(t, testrig.OnDB(db, dsn), testrig.Configs(yamls...))
}

func newRigWith(t *testing.T, opts ...testrig.Option) *rig {
	t.Helper()
	hash, err := web.HashPassword(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	w := testrig.New(t, append(opts, testrig.PasswordHash(hash), testrig.User("operator", runtime.RoleUser, runtime.GrantApprove),
		testrig.Engine(runtime.Options{Lease: testLease}),
		testrig.Orders(builtin.Order{ID: "TST-", Customer: "Test", AmountCents: 5000, Currency: "EUR"}))...)
	return &rig{World: w, owner: w.Actor("owner"), operator: w.Actor("operator")}
}

// waitingRun is a run that waits for an approval.
type waitingRun struct {
	id     int64
	order  string
	digest string
}

// waiting starts a run of a configuration on a new order, owned by the
// rig's owner, and runs it in the test until it pauses for an approval.
func (r *rig) waiting(t *testing.T, configuration string) waitingRun {
	t.Helper()
	out, order := r.Start(t, testrig.Launch{Configuration: configuration})
	if out.Status != runtime.StatusWaitingForApproval {
		t.Fatalf("run %d of %s = %s (%v), want waiting_for_approval", out.RunID, configuration, out.Status, out.Err)
	}
	return waitingRun{id: out.RunID, order: order, digest: out.Digest}
}

// waitWorkerRow polls the workers table until the process with this pid
// has a row seen within the last 15 seconds (what the server calls alive).
func waitWorkerRow(t *testing.T, r *rig, pid int, within time.Duration) {
	t.Helper()
	if !testrig.Eventually(within, func() bool {
		return r.Count(t, `SELECT COUNT(*) FROM workers WHERE pid = ? AND seen_at > NOW(6) - INTERVAL 15 SECOND`, pid) > 0
	}) {
		t.Fatalf("no fresh workers row of pid %d within %s", pid, within)
	}
}

// startServe starts "turnstile serve" on the DSN and a free address, with
// args, and waits until it is ready.
func startServe(t *testing.T, dsn string, args ...string) *server {
	t.Helper()
	addr := freeAddr(t)
	return startServer(t, addr, childEnv(), append([]string{"--addr", addr, "--dsn", dsn}, args...)...)
}

// startWork starts "turnstile work" on the rig's database with args and
// waits until its workers row is in the database. It is killed when the
// test ends if the test did not stop it.
func startWork(t *testing.T, r *rig, args ...string) *server {
	t.Helper()
	return startWorkOn(t, r, r.DSN, args...)
}

// startWorkOn is startWork on another DSN of the rig's database: another
// node of a cluster.
func startWorkOn(t *testing.T, r *rig, dsn string, args ...string) *server {
	t.Helper()
	p := startChild(t, childEnv(), append([]string{"work", "--dsn", dsn}, args...)...)
	waitWorkerRow(t, r, p.cmd.Process.Pid, 30*time.Second)
	return p
}

// kill9 kills a child process with SIGKILL and waits for it to be gone.
func kill9(t *testing.T, p *server) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not die within 10s of SIGKILL")
	}
}

// terminate sends SIGTERM and returns how long the process took to exit
// and its exit status; it fails the test when the process outlives within.
func terminate(t *testing.T, p *server, within time.Duration) (time.Duration, int) {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("the process did not exit within %s of SIGTERM; stderr:\n%s", within, p.stderr)
	}
	return time.Since(start), p.cmd.ProcessState.ExitCode()
}

// finishedBy counts the "worker finished a continuation" records of a
// process by run id and the status they report.
func finishedBy(t *testing.T, p *server) map[int64][]string {
	t.Helper()
	out := map[int64][]string{}
	for _, l := range p.logLines(t) {
		if l["msg"] != "worker finished a continuation" {
			continue
		}
		id, _ := l["run"].(float64)
		status, _ := l["status"].(string)
		out[int64(id)] = append(out[int64(id)], status)
	}
	return out
}

// browser is a signed-in web session: a cookie jar, no redirect following
// (so a test sees each 303), and the session's current CSRF token.
type browser struct {
	base   string
	client *http.Client
	csrf   string
}

var (
	csrfField   = regexp.MustCompile(`name="csrf_token" value="([^"]*)"`)
	runIDAttr   = regexp.MustCompile(`data-run-id="(\d+)"`)
	digestField = regexp.MustCompile(`name="turn_digest" value="([0-9a-f]*)"`)
	flashDiv    = regexp.MustCompile(`data-testid="flash"[^>]*>([^<]*)<`)
	noteTag     = regexp.MustCompile(`data-testid="run-note"[^>]*>([^<]*)<`)
)

// signIn signs a user in on a server: GET /login for the CSRF token, then
// POST /login, which must answer 303 to /inbox.
func signIn(t *testing.T, addr, name string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &browser{base: "http://" + addr, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	status, body := b.get(t, "/login")
	m := csrfField.FindStringSubmatch(body)
	if status != http.StatusOK || m == nil {
		t.Fatalf("GET /login = %d without a csrf_token:\n%s", status, body)
	}
	resp := b.post(t, "/login", url.Values{"csrf_token": {m[1]}, "username": {name}, "password": {testPassword}}, false)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/inbox" {
		t.Fatalf("POST /login as %s = %d to %q, want 303 to /inbox", name, resp.StatusCode, resp.Header.Get("Location"))
	}
	return b
}

func (b *browser) get(t *testing.T, path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(body)
}

// post sends a form; streamed asks for NDJSON. The caller closes the body.
func (b *browser) post(t *testing.T, path string, form url.Values, streamed bool) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if streamed {
		req.Header.Set("Accept", "application/x-ndjson")
	}
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

// inboxPage is what a test reads of GET /inbox.
type inboxPage struct {
	digests map[int64]string // run id → the turn_digest of its form
	notes   map[int64]string // run id → the note shown with it
	flash   string
}

// inbox loads /inbox, keeps the session's CSRF token and returns the runs
// on it with their digests, and the flash message.
func (b *browser) inbox(t *testing.T) inboxPage {
	t.Helper()
	status, body := b.get(t, "/inbox")
	if status != http.StatusOK {
		t.Fatalf("GET /inbox = %d:\n%s", status, body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("GET /inbox has no csrf_token:\n%s", body)
	}
	b.csrf = m[1]
	p := inboxPage{digests: map[int64]string{}, notes: map[int64]string{}}
	if f := flashDiv.FindStringSubmatch(body); f != nil {
		p.flash = strings.TrimSpace(unescapeHTML(f[1]))
	}
	parts := strings.Split(body, `data-testid="inbox-run"`)
	for _, part := range parts[1:] {
		id := runIDAttr.FindStringSubmatch(part)
		d := digestField.FindStringSubmatch(part)
		if id == nil || d == nil {
			t.Fatalf("an inbox-run element without data-run-id or turn_digest:\n%s", part)
		}
		n, _ := strconv.ParseInt(id[1], 10, 64)
		p.digests[n] = d[1]
		if note := noteTag.FindStringSubmatch(part); note != nil {
			p.notes[n] = strings.TrimSpace(unescapeHTML(note[1]))
		}
	}
	return p
}

func unescapeHTML(s string) string {
	return strings.NewReplacer("&#39;", "'", "&quot;", `"`, "&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}

// digestOf loads the inbox and returns the digest its form carries for a
// run, failing when the run is not on it.
func (b *browser) digestOf(t *testing.T, id int64) string {
	t.Helper()
	d, ok := b.inbox(t).digests[id]
	if !ok {
		t.Fatalf("run %d is not on the inbox", id)
	}
	return d
}

// decide posts an approval of a run's turn (scope once) with the CSRF token
// of the last inbox load.
func (b *browser) decide(t *testing.T, id int64, digest string, streamed bool) *http.Response {
	t.Helper()
	return b.post(t, fmt.Sprintf("/inbox/runs/%d/decision", id), url.Values{"csrf_token": {b.csrf},
		"turn_digest": {digest}, "decision": {"approve"}, "scope": {"once"}}, streamed)
}

// inboxStream is the NDJSON answer of a streamed decision of a run, read
// as it arrives; each line's At counts from the POST.
type inboxStream struct {
	*testrig.Stream
	run int64
}

// stream posts a streamed approval and requires the stream to start (200,
// NDJSON); its lines are read in the background.
func (b *browser) stream(t *testing.T, id int64, digest string) *inboxStream {
	t.Helper()
	posted := time.Now()
	resp := b.decide(t, id, digest, true)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("streamed decision of run %d = %d %s, want a 200 NDJSON stream:\n%s", id, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return &inboxStream{Stream: testrig.Read(t, resp.Body, posted), run: id}
}

// waitSteps waits until a progress line reported at least n steps.
func (s *inboxStream) waitSteps(t *testing.T, n int, within time.Duration) {
	t.Helper()
	s.WaitFor(t, within, fmt.Sprintf("run %d's step %d", s.run, n), func(l testrig.Line) bool {
		return l.Type() == "progress" && l.Int("steps") >= n
	})
}

// mariaDB is a private MariaDB server that a test owns, in a temporary
// directory, on a port of its own.
type mariaDB struct {
	dir, port string
	cmd       *exec.Cmd
	done      chan struct{}
	log       *syncBuffer
}

// startMariaDB installs and starts a private MariaDB (see NOTES.md). It
// skips the test when mariadbd is not installed, except under CI=true,
// where that is a failure.
func startMariaDB(t *testing.T) *mariaDB {
	t.Helper()
	for _, name := range []string{"mariadbd", "mariadb-install-db"} {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed (%v); CI must have the MariaDB server package (apt-get install mariadb-server)", name, err)
			}
			t.Skipf("%s is not installed (%v): install the MariaDB server package (apt-get install mariadb-server) to run this test", name, err)
		}
	}
	// A short path: the unix socket's path has to fit in 108 bytes.
	dir, err := os.MkdirTemp("", "tsdb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_, port, _ := strings.Cut(freeAddr(t), ":")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A tmpdir of its own: a MariaDB server deletes at start every "#sql"
	// file in its tmpdir, which in /tmp are the live temporary tables of
	// the other servers on the machine.
	if err := os.Mkdir(dir+"/tmp", 0o755); err != nil {
		t.Fatal(err)
	}
	install := exec.CommandContext(ctx, "mariadb-install-db", "--no-defaults", "--auth-root-authentication-method=normal",
		"--datadir="+dir+"/data", "--tmpdir="+dir+"/tmp", "--user=root", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m := &mariaDB{dir: dir, port: port, log: &syncBuffer{}}
	m.start(t)
	t.Cleanup(func() {
		if m.cmd != nil && m.cmd.Process != nil {
			select {
			case <-m.done:
			default:
				m.cmd.Process.Kill()
				<-m.done
			}
		}
	})
	return m
}

// dsn is the DSN of a database on the private server.
func (m *mariaDB) dsn(database string) string {
	return "root@tcp(127.0.0.1:" + m.port + ")/" + database
}

// start starts mariadbd on the data directory and waits until it answers.
func (m *mariaDB) start(t *testing.T) {
	t.Helper()
	m.cmd = exec.Command("mariadbd", "--no-defaults", "--datadir="+m.dir+"/data", "--tmpdir="+m.dir+"/tmp", "--socket="+m.dir+"/sock",
		"--port="+m.port, "--bind-address=127.0.0.1", "--user=root", "--pid-file="+m.dir+"/pid")
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start mariadbd: %v", err)
	}
	done := make(chan struct{})
	m.done = done
	go func() { m.cmd.Wait(); close(done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-done:
			t.Fatalf("mariadbd exited before it answered:\n%s", m.log)
		default:
		}
		db, err := sql.Open("mysql", m.dsn(""))
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = db.PingContext(ctx)
			cancel()
			db.Close()
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mariadbd on port %s did not answer within 60s (%v):\n%s", m.port, err, m.log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop shuts mariadbd down with SIGTERM and waits for it to exit.
func (m *mariaDB) stop(t *testing.T) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM mariadbd: %v", err)
	}
	select {
	case <-m.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("mariadbd did not stop within 60s of SIGTERM:\n%s", m.log)
	}
}

// createDatabase creates and migrates a database on the private server.
func (m *mariaDB) createDatabase(t *testing.T, name string) (*sqlx.DB, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := store.Open(ctx, m.dsn(""))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	dsn := m.dsn(name)
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db, dsn
}
