package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/turnstile-dev/turnstile/store/testrig"
)

// proxyReadTimeout is the upstream read timeout of both configurations in
// testdata/proxy.
const proxyReadTimeout = 8 * time.Second

// proxyKind is a reverse proxy the tests put in front of turnstile serve,
// configured from a template in testdata/proxy.
type proxyKind struct {
	name string // the command, and the Debian package that installs it
	tmpl string // its configuration template under testdata/proxy
	args func(dir, conf string) []string
}

var (
	nginxProxy = proxyKind{name: "nginx", tmpl: "nginx.conf.tmpl", args: func(dir, conf string) []string {
		// -e: nginx opens its error log before it reads the configuration.
		return []string{"-p", dir + "/", "-e", "stderr", "-c", conf}
	}}
	caddyProxy = proxyKind{name: "caddy", tmpl: "Caddyfile.tmpl", args: func(_, conf string) []string {
		return []string{"run", "--config", conf, "--adapter", "caddyfile"}
	}}
	proxyKinds = []proxyKind{nginxProxy, caddyProxy}
)

// proxyCommand finds the proxy's command, also in /usr/sbin, which a
// non-root PATH often lacks, or says what to install.
func proxyCommand(k proxyKind) (path, missing string) {
	if p, err := exec.LookPath(k.name); err == nil {
		return p, ""
	}
	p := "/usr/sbin/" + k.name
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return p, ""
	}
	return "", fmt.Sprintf("%s is not installed: install the Debian package %s (apt-get install %s) to run this test", k.name, k.name, k.name)
}

// proxy is a reverse proxy child process, or the note that its command is
// missing.
type proxy struct {
	kind    string
	missing string // why it did not start; see require
	addr    string // where it listens
	cmd     *exec.Cmd
	log     *syncBuffer
	done    chan struct{} // closed when the process has exited
	waitErr error         // set before done is closed
}

// require skips the test when the proxy's command is missing, except under
// CI=true, where that is a failure: .ci/run installs both proxies.
func (p *proxy) require(t *testing.T) {
	t.Helper()
	if p.missing == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; .ci/run installs it", p.missing)
	}
	t.Skip(p.missing)
}

// startProxy renders the kind's configuration for upstream (host:port of
// a turnstile serve) and runs the proxy on a free loopback port until the
// test ends. It returns once GET /healthz through the proxy answers 200;
// when the command is not installed it returns a proxy that only says so
// (see require), so that the test's other proxy still runs.
func startProxy(t *testing.T, k proxyKind, upstream string) *proxy {
	t.Helper()
	command, missing := proxyCommand(k)
	if missing != "" {
		return &proxy{kind: k.name, missing: missing}
	}
	tmpl, err := template.ParseFiles(filepath.Join("testdata", "proxy", k.tmpl))
	if err != nil {
		t.Fatal(err)
	}
	// The folder's owner is root when the tests run as root, and nginx's
	// workers then run as nobody: they must be able to enter it.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, strings.TrimSuffix(k.tmpl, ".tmpl"))
	// freeAddr's port may be taken again before the proxy binds it: try
	// another one then.
	for attempt := 1; ; attempt++ {
		addr := freeAddr(t)
		var b strings.Builder
		if err := tmpl.Execute(&b, struct{ Listen, Upstream, Dir string }{addr, upstream, dir}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(conf, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		p := &proxy{kind: k.name, addr: addr, log: &syncBuffer{}, done: make(chan struct{})}
		p.cmd = exec.Command(command, k.args(dir, conf)...)
		// Caddy keeps its state under HOME and the XDG folders.
		p.cmd.Env = childEnv("HOME="+dir, "XDG_CONFIG_HOME="+dir+"/config", "XDG_DATA_HOME="+dir+"/data")
		p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
		// A group of its own, so that nginx's worker goes with its master.
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := p.cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", k.name, err)
		}
		go func() {
			p.waitErr = p.cmd.Wait()
			close(p.done)
		}()
		t.Cleanup(func() { p.kill(t) })
		err := p.waitReady(15 * time.Second)
		if err == nil {
			return p
		}
		if p.exited() && attempt < 3 {
			t.Logf("%s exited at start (%v), trying another port; its log:\n%s", k.name, err, p.log)
			continue
		}
		t.Fatalf("%s on %s in front of %s: %v; its log:\n%s", k.name, addr, upstream, err, p.log)
	}
}

func (p *proxy) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitReady polls GET /healthz through the proxy until it answers 200.
func (p *proxy) waitReady(within time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	last := "no answer yet"
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("it exited (%v)", p.waitErr)
		}
		resp, err := client.Get("http://" + p.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("GET /healthz through it did not answer 200 within %s (last: %s)", within, last)
}

// kill ends the proxy and whatever processes it started, at once.
func (p *proxy) kill(t *testing.T) {
	t.Helper()
	if p.missing != "" || p.exited() {
		return
	}
	// The negative pid is the process group Setpgid gave it.
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill %s: %v", p.kind, err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("%s did not exit within 10s of SIGKILL", p.kind)
	}
}

// nativeDecision is how a plain (no-JS) POST of an approval went.
type nativeDecision struct {
	status   int
	location string
	took     time.Duration
	err      error
}

// postNative posts a plain approval of a run's turn and waits for the
// answer; unlike browser.decide it may run outside the test's goroutine.
func postNative(b *browser, id int64, digest string) nativeDecision {
	form := url.Values{"csrf_token": {b.csrf}, "turn_digest": {digest}, "decision": {"approve"}, "scope": {"once"}}
	start := time.Now()
	resp, err := b.client.PostForm(fmt.Sprintf("%s/inbox/runs/%d/decision", b.base, id), form)
	if err != nil {
		return nativeDecision{took: time.Since(start), err: err}
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nativeDecision{status: resp.StatusCode, location: resp.Header.Get("Location"), took: time.Since(start)}
}

// checkInboxStream asserts the shape of an inbox stream that ran to
// its end: {"type":"progress","steps":0} first; then progress lines
// counting 1, 2, … steps, each count once and in order; keepalive lines
// repeating the count so far; {"type":"settled"} last; nothing else.
func checkInboxStream(t *testing.T, lines []testrig.Line, steps int) {
	t.Helper()
	if len(lines) == 0 || lines[0].Type() != "progress" || lines[0].Int("steps") != 0 {
		t.Errorf("first line = %v, want {\"type\":\"progress\",\"steps\":0}", first(lines))
	}
	if len(lines) == 0 || lines[len(lines)-1].Type() != "settled" {
		t.Errorf("the stream does not end with {\"type\":\"settled\"}")
	}
	count := 0
	for i, l := range lines {
		switch {
		case i == 0:
		case l.Type() == "progress":
			if l.Int("steps") != count+1 {
				t.Errorf("line %d = %s, want progress step %d next", i+1, l.Raw, count+1)
			}
			count = l.Int("steps")
		case l.Type() == "keepalive":
			if l.Int("steps") != count {
				t.Errorf("line %d = %s, want a keepalive repeating the %d steps so far", i+1, l.Raw, count)
			}
		case l.Type() == "settled" && i == len(lines)-1:
		default:
			t.Errorf("line %d = %s: no such line belongs here", i+1, l.Raw)
		}
	}
	if count != steps {
		t.Errorf("the stream counted %d steps, want the %d the run recorded", count, steps)
	}
}

func first(lines []testrig.Line) string {
	if len(lines) == 0 {
		return "none"
	}
	return lines[0].Raw
}

// longestSilence is the longest time the client waited for a line: from
// the POST to the first line, or between two lines.
func longestSilence(lines []testrig.Line) time.Duration {
	var longest, prev time.Duration
	for _, l := range lines {
		longest = max(longest, l.At-prev)
		prev = l.At
	}
	return longest
}
