package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
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

// rig is one test's database with its configurations, two users (owner
// owns the runs, operator holds the approve grant and decides them) and an
// engine of the test's own that starts runs in it.
type rig struct {
	db              *sqlx.DB
	dsn             string
	st              *store.Store
	eng             *runtime.Engine
	owner, operator runtime.Actor
	orders          int
}

// newRig gives the test a database of its own (store/dbtest) with the
// configurations in it.
func newRig(t *testing.T, yamls ...string) *rig {
	t.Helper()
	db, dsn := dbtest.New(t)
	return newRigOn(t, db, dsn, yamls...)
}

// newRigOn sets the rig up on a migrated database.
func newRigOn(t *testing.T, db *sqlx.DB, dsn string, yamls ...string) *rig {
	t.Helper()
	ctx := context.Background()
	st := store.New(db)
	tools := builtin.Registry(builtin.Tools(st)...)
	r := &rig{db: db, dsn: dsn, st: st, eng: runtime.New(runtime.Options{Store: st, Tools: tools,
		Providers: scripted.Factory, Validator: schema.New(), Lease: testLease})}
	for i, y := range yamls {
		cfg, err := configfile.Parse(fmt.Sprintf("test-%d.yaml", i), []byte(y), func(n string) bool { _, ok := tools[n]; return ok })
		if err != nil {
			t.Fatalf("configuration %d: %v\n%s", i, err, y)
		}
		if err := st.SaveConfiguration(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	hash, err := web.HashPassword(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	add := func(name string, grants ...string) runtime.Actor {
		u := &runtime.User{Name: name, Role: runtime.RoleUser, Grants: grants, PasswordHash: hash}
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		return u.Actor()
	}
	r.owner = add("owner")
	r.operator = add("operator", runtime.GrantApprove)
	return r
}

// order creates a fresh order and returns its id, which the scripted
// provider finds in a prompt.
func (r *rig) order(t *testing.T) string {
	t.Helper()
	r.orders++
	id := fmt.Sprintf("TST-%d", 1000+r.orders)
	if err := r.st.CreateDemoOrder(context.Background(), runtime.Order{ID: id, Customer: "Test", AmountCents: 5000, Currency: "EUR"}); err != nil {
		t.Fatal(err)
	}
	return id
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
	ctx := context.Background()
	order := r.order(t)
	c, err := r.eng.Start(ctx, runtime.StartRequest{Configuration: configuration, Prompt: "Please refund " + order, Owner: r.owner})
	if err != nil {
		t.Fatal(err)
	}
	out := c.Run(ctx, nil)
	if out.Err != nil || out.Status != runtime.StatusWaitingForApproval {
		t.Fatalf("run %d of %s = %s (%v), want waiting_for_approval", out.RunID, configuration, out.Status, out.Err)
	}
	return waitingRun{id: out.RunID, order: order, digest: out.Digest}
}

// runRow is what the tests read of a run.
type runRow struct {
	Status        string `db:"status"`
	Digest        string `db:"turn_digest"`
	ClaimedBy     string `db:"claimed_by"`
	PendingEffect string `db:"pending_effect"`
	Reason        string `db:"termination_reason"`
}

func readRun(t *testing.T, db *sqlx.DB, id int64) runRow {
	t.Helper()
	var r runRow
	if err := db.Get(&r, `SELECT status, COALESCE(turn_digest, '') AS turn_digest,
		COALESCE(claimed_by, '') AS claimed_by, COALESCE(pending_effect, '') AS pending_effect,
		COALESCE(termination_reason, '') AS termination_reason FROM runs WHERE id = ?`, id); err != nil {
		t.Fatalf("read run %d: %v", id, err)
	}
	return r
}

// waitRun polls a run until ok says yes, and fails the test at the
// deadline with the run's last state.
func waitRun(t *testing.T, db *sqlx.DB, id int64, within time.Duration, what string, ok func(runRow) bool) runRow {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := readRun(t, db, id)
		if ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d did not become %s within %s: %+v", id, what, within, r)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitStatus polls until the run has the status.
func waitStatus(t *testing.T, db *sqlx.DB, id int64, status runtime.Status, within time.Duration) runRow {
	t.Helper()
	return waitRun(t, db, id, within, string(status), func(r runRow) bool { return r.Status == string(status) })
}

// refunds counts the refunds of an order.
func refunds(t *testing.T, db *sqlx.DB, order string) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT COUNT(*) FROM demo_refunds WHERE order_id = ?`, order); err != nil {
		t.Fatal(err)
	}
	return n
}

// decisionRow is a decision as stored.
type decisionRow struct {
	Digest   string `db:"turn_digest"`
	Kind     string `db:"kind"`
	Path     string `db:"path"`
	Executed bool   `db:"executed"`
	Outcome  string `db:"outcome"`
}

func decisions(t *testing.T, db *sqlx.DB, id int64) []decisionRow {
	t.Helper()
	var ds []decisionRow
	if err := db.Select(&ds, `SELECT turn_digest, kind, path, executed_at IS NOT NULL AS executed,
		COALESCE(outcome, '') AS outcome FROM decisions WHERE run_id = ? ORDER BY id`, id); err != nil {
		t.Fatal(err)
	}
	return ds
}

// eventRow is a stored event.
type eventRow struct {
	Seq     int    `db:"seq"`
	Kind    string `db:"kind"`
	Payload string `db:"payload"`
}

// checkEvents reads a run's events and asserts that their seqs are 1, 2,
// 3, … with neither a gap nor a duplicate.
func checkEvents(t *testing.T, db *sqlx.DB, id int64) []eventRow {
	t.Helper()
	var evs []eventRow
	if err := db.Select(&evs, `SELECT seq, kind, payload FROM run_events WHERE run_id = ? ORDER BY seq`, id); err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		if e.Seq != i+1 {
			var seqs []int
			for _, e := range evs {
				seqs = append(seqs, e.Seq)
			}
			t.Errorf("run %d: event seqs %v, want 1..%d consecutive without duplicates", id, seqs, len(evs))
			break
		}
	}
	return evs
}

// countKind counts the events of a kind.
func countKind(evs []eventRow, kind runtime.EventKind) int {
	n := 0
	for _, e := range evs {
		if e.Kind == string(kind) {
			n++
		}
	}
	return n
}

// waitWorkerRow polls the workers table until the process with this pid
// has a row seen within the last 15 seconds (what the server calls alive).
func waitWorkerRow(t *testing.T, db *sqlx.DB, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var n int
		if err := db.Get(&n, `SELECT COUNT(*) FROM workers WHERE pid = ? AND seen_at > NOW(6) - INTERVAL 15 SECOND`, pid); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fresh workers row of pid %d within %s", pid, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startServe starts "turnstile serve" on the DSN and a free address, with
// args, and waits until it is ready.
func startServe(t *testing.T, dsn string, args ...string) *server {
	t.Helper()
	addr := freeAddr(t)
	return startServer(t, addr, childEnv(), append([]string{"--addr", addr, "--dsn", dsn}, args...)...)
}

// startWork starts "turnstile work" on the DSN with args and waits until
// its workers row is in the database. It is killed when the test ends if
// the test did not stop it.
func startWork(t *testing.T, db *sqlx.DB, dsn string, args ...string) *server {
	t.Helper()
	p := &server{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binary, append([]string{"work", "--dsn", dsn}, args...)...)
	p.cmd.Env = childEnv()
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start turnstile work: %v", err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	waitWorkerRow(t, db, p.cmd.Process.Pid, 30*time.Second)
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

// streamLine is one NDJSON line of an inbox stream.
type streamLine struct {
	Type  string `json:"type"`
	Steps int64  `json:"steps"`
	raw   string
}

// ndjson reads an inbox stream in the background.
type ndjson struct {
	run  int64
	mu   sync.Mutex
	got  []streamLine
	err  error
	done chan struct{}
}

// stream posts a streamed approval and requires the stream to start (200,
// NDJSON); its lines are read in the background.
func (b *browser) stream(t *testing.T, id int64, digest string) *ndjson {
	t.Helper()
	resp := b.decide(t, id, digest, true)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("streamed decision of run %d = %d %s, want a 200 NDJSON stream:\n%s", id, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	s := &ndjson{run: id, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var l streamLine
			err := json.Unmarshal(sc.Bytes(), &l)
			l.raw = sc.Text()
			s.mu.Lock()
			s.got = append(s.got, l)
			if err != nil && s.err == nil {
				s.err = fmt.Errorf("line %q is not JSON: %w", sc.Text(), err)
			}
			s.mu.Unlock()
		}
		s.mu.Lock()
		if err := sc.Err(); err != nil && s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
	}()
	t.Cleanup(func() {
		resp.Body.Close()
		<-s.done
	})
	return s
}

func (s *ndjson) lines() []streamLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]streamLine(nil), s.got...)
}

// steps is the highest step count the stream reported so far.
func (s *ndjson) steps() int64 {
	var n int64
	for _, l := range s.lines() {
		n = max(n, l.Steps)
	}
	return n
}

// waitSteps polls until the stream reported at least n steps.
func (s *ndjson) waitSteps(t *testing.T, n int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for s.steps() < n {
		select {
		case <-s.done:
			t.Fatalf("the stream of run %d ended after %d steps, before step %d: %v", s.run, s.steps(), n, s.raw())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream of run %d reported %d steps within %s, want %d", s.run, s.steps(), within, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ended reports whether the body ended.
func (s *ndjson) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// wait waits for the end of the body and returns every line and the read
// error, if any.
func (s *ndjson) wait(t *testing.T, within time.Duration) ([]streamLine, error) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(within):
		t.Fatalf("the stream of run %d did not end within %s: %v", s.run, within, s.raw())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]streamLine(nil), s.got...), s.err
}

func (s *ndjson) raw() []string {
	var out []string
	for _, l := range s.lines() {
		out = append(out, l.raw)
	}
	return out
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
	install := exec.CommandContext(ctx, "mariadb-install-db", "--no-defaults", "--auth-root-authentication-method=normal",
		"--datadir="+dir+"/data", "--user=root", "--skip-test-db")
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
	m.cmd = exec.Command("mariadbd", "--no-defaults", "--datadir="+m.dir+"/data", "--socket="+m.dir+"/sock",
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
