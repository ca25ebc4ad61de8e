package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/store/dbtest"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// planted returns a unique secret-looking string to grep the logs for.
func planted(what string) string {
	b := make([]byte, 8)
	rand.Read(b)
	return what + "-" + hex.EncodeToString(b)
}

// fakeToken has the shape of an API token.
func fakeToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return "tst_" + hex.EncodeToString(b)
}

func randomKey(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// credentials is a LogValuer whose value hides a secret in a group.
type credentials struct{ user, secret string }

func (c credentials) LogValue() slog.Value {
	return slog.GroupValue(slog.String("user", c.user), slog.String("secret", c.secret))
}

// TestRedactAttr logs planted secrets every way a record can carry them and
// requires every line to be JSON without any of them, and what is no
// secret to stay readable.
func TestRedactAttr(t *testing.T) {
	var buf bytes.Buffer
	log, err := newLogger(&buf, "debug")
	if err != nil {
		t.Fatal(err)
	}
	s := map[string]string{}
	for _, name := range []string{"password", "authorization", "bearer", "cookie", "api-key", "group", "header",
		"header-cookie", "form-password", "form-csrf", "json", "dsn", "url", "valuer", "bytes", "authgroup", "state-keys", "set-cookie", "csrf-attr"} {
		s[name] = planted(name)
	}
	token, msgToken, providerKey := fakeToken(), fakeToken(), "sk-proj-"+strings.Repeat("Ab1", 10)

	log.Info("sign in", "user", "ada", "password", s["password"])
	log.Info("request", "Authorization", "Bearer "+s["authorization"], "path", "/api/runs/7")
	log.Info("request", "header", "bearer "+s["bearer"])
	log.Warn("token refused", "err", fmt.Errorf("authenticate %s: %w", token, errors.New("unknown")))
	log.Debug("bearer token rejected: " + msgToken)
	log.With("X-Api-Key", s["api-key"]).Info("with attrs")
	log.WithGroup("request").Info("grouped", "Cookie", "turnstile_session="+s["cookie"], "Set-Cookie", s["set-cookie"])
	log.Info("nested", slog.Group("auth", "token", s["group"], "user", "ada"))
	log.Info("headers", "headers", http.Header{"Authorization": {"Bearer " + s["header"]},
		"Cookie": {"turnstile_session=" + s["header-cookie"]}, "Accept": {"text/html"}})
	log.Info("form", "body", "username=ada&password="+s["form-password"]+"&csrf_token="+s["form-csrf"])
	log.Info("json", "body", `{"name":"ada","password":"`+s["json"]+`"}`)
	log.Error("open", "err", fmt.Errorf(`open "root:%s@tcp(127.0.0.1:3306)/turnstile": refused`, s["dsn"]))
	log.Info("fetch", "url", "https://ada:"+s["url"]+"@mcp.example.com/v1")
	log.Info("valuer", "who", credentials{"ada", s["valuer"]})
	log.Info("bytes", "raw", []byte("Authorization: Bearer "+s["bytes"]))
	log.WithGroup("authorization").Info("group named like a credential", "value", s["authgroup"])
	log.Info("env", "TURNSTILE_STATE_KEYS", "k1:"+s["state-keys"], "csrf_token", s["csrf-attr"])
	log.Error("provider failed", "err", errors.New("401 Incorrect API key provided: "+providerKey))
	runCred := "tsr_" + fakeToken()[4:]
	log.Warn("mcp call failed", "err", fmt.Errorf("call with %s: refused", runCred))
	log.Info("kept", "input_tokens", 42, "run", 7, "prefix", "tst_0123abcd", "key_id", "k1")

	out := buf.String()
	sc := bufio.NewScanner(strings.NewReader(out))
	lines := 0
	for sc.Scan() {
		lines++
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("line %q is not JSON: %v", sc.Text(), err)
		}
	}
	if lines != 20 {
		t.Errorf("%d lines logged, want 20:\n%s", lines, out)
	}
	secrets := []string{token, token[4:], msgToken[4:], providerKey, runCred[4:12]}
	for _, v := range s {
		secrets = append(secrets, v)
	}
	for _, secret := range secrets {
		if strings.Contains(out, secret) {
			t.Errorf("the log holds %q:\n%s", secret, out)
		}
	}
	for _, kept := range []string{`"input_tokens":42`, `"run":7`, `"prefix":"tst_0123abcd"`, `"key_id":"k1"`,
		`"path":"/api/runs/7"`, `"Accept":["text/html"]`, `"user":"ada"`, "bearer token rejected", "authenticate tst_[REDACTED]", "call with tsr_[REDACTED]",
		`"Authorization":"[REDACTED]"`, "username=ada&password=[REDACTED]"} {
		if !strings.Contains(out, kept) {
			t.Errorf("the log lacks %s:\n%s", kept, out)
		}
	}
}

// TestStateKeysAtStart: serve and work say at start how state is stored;
// a malformed TURNSTILE_STATE_KEYS stops the command without repeating the
// key.
func TestStateKeysAtStart(t *testing.T) {
	_, dsn := dbtest.New(t)
	ctx := context.Background()
	start := func(command, keys string) (string, error) {
		var buf bytes.Buffer
		log, err := newLogger(&buf, "info")
		if err != nil {
			t.Fatal(err)
		}
		d := dbFlags{dsn: dsn, command: command, getenv: func(k string) string {
			return map[string]string{stateKeysVar: keys}[k]
		}}
		a, err := open(ctx, d, log)
		if err == nil {
			a.close()
		}
		return buf.String(), err
	}

	logs, err := start("serve", "")
	if err != nil || !strings.Contains(logs, `"level":"WARN","msg":"state is stored unencrypted"`) {
		t.Errorf("serve without keys: %v, logs %q; want the warning", err, logs)
	}
	if logs, _ := start("user add", ""); logs != "" {
		t.Errorf("user add without keys logged %q, want nothing", logs)
	}
	logs, err = start("work", "new:"+randomKey(32)+",old:"+randomKey(16))
	if err != nil || !strings.Contains(logs, `"msg":"state is encrypted at rest","sealing_key_id":"new","key_ids":["new","old"]`) {
		t.Errorf("work with keys: %v, logs %q; want the keys named", err, logs)
	}
	bad := base64.StdEncoding.EncodeToString([]byte("only-twenty-bytes!!!"))
	if _, err := start("serve", "k1:"+bad); err == nil || !strings.Contains(err.Error(), "TURNSTILE_STATE_KEYS: seal: key 1 (k1): 20 bytes") ||
		strings.Contains(err.Error(), bad) {
		t.Errorf("serve with a 20-byte key = %v; want an error naming TURNSTILE_STATE_KEYS and not the key", err)
	}
}

// logClient is a client that keeps the session cookie by hand, so the test
// knows every value it sent.
type logClient struct {
	t      *testing.T
	base   string
	client *http.Client
	cookie string // the turnstile_session value
	login  string // the turnstile_login_csrf value: the sign-in form's token
}

func (b *logClient) do(method, path string, body io.Reader, header map[string]string) (*http.Response, string) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if req.Header.Get("Cookie") == "" {
		var jar []string
		if b.cookie != "" {
			jar = append(jar, "turnstile_session="+b.cookie)
		}
		if b.login != "" && path == "/login" {
			jar = append(jar, "turnstile_login_csrf="+b.login)
		}
		if len(jar) > 0 {
			req.Header.Set("Cookie", strings.Join(jar, "; "))
		}
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "turnstile_session" && c.Value != "" {
			b.cookie = c.Value
		}
		if c.Name == "turnstile_login_csrf" && c.Value != "" {
			b.login = c.Value
		}
	}
	return resp, string(data)
}

func (b *logClient) form(path string, values url.Values) *http.Response {
	b.t.Helper()
	resp, _ := b.do(http.MethodPost, path, strings.NewReader(values.Encode()),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	return resp
}

var (
	csrfPattern     = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)
	passwordPattern = regexp.MustCompile(`(?m)^\s+(admin|operator|user)\s+(\S+)\s`)
)

func csrfOf(t *testing.T, page string) string {
	t.Helper()
	m := csrfPattern.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf_token in the page:\n%.2000s", page)
	}
	return m[1]
}

// waitRunStatus waits until a run has the status, within 20 seconds.
func waitRunStatus(t *testing.T, db *sqlx.DB, id int64, want string) {
	t.Helper()
	var got string
	if !testrig.Eventually(20*time.Second, func() bool {
		if err := db.Get(&got, `SELECT status FROM runs WHERE id = ?`, id); err != nil {
			t.Fatal(err)
		}
		return got == want
	}) {
		t.Fatalf("run %d is %s after 20s, want %s", id, got, want)
	}
}

// TestLogsCarryNoSecrets runs the server at debug level with encrypted
// state through sign-in (a wrong password, then the right one), an inbox
// decision, API calls with a good token, an unknown token and other
// credentials, and a run started and approved over the API; then greps
// everything it logged for every secret that passed through it.
func TestLogsCarryNoSecrets(t *testing.T) {
	db, dsn := dbtest.New(t)
	keyNew, keyOld := randomKey(32), randomKey(16)
	keys := stateKeysVar + "=k2:" + keyNew + ",k1:" + keyOld
	addr := freeAddr(t)
	srv := startServer(t, addr, childEnv(keys), "--addr", addr, "--dsn", dsn, "--demo", "--log-level", "debug")

	secrets := []string{keyNew, keyOld}
	passwords := map[string]string{}
	for _, m := range passwordPattern.FindAllStringSubmatch(srv.stdout.String(), -1) {
		passwords[m[1]] = m[2]
		secrets = append(secrets, m[2])
	}
	if len(passwords) != 3 {
		t.Fatalf("demo passwords %v from stdout %q, want 3", passwords, srv.stdout.String())
	}
	created := runBinary(t, childEnv("TURNSTILE_DSN="+dsn, keys), "token", "create", "--user", "operator", "--scopes", "run:start,run:read,run:decide")
	tok := strings.TrimSpace(created.stdout)
	if created.code != 0 || !strings.HasPrefix(tok, "tst_") {
		t.Fatalf("token create = exit %d, %q, %q", created.code, created.stdout, created.stderr)
	}
	if strings.Contains(created.stderr, tok[12:]) {
		t.Errorf("token create wrote the token to standard error: %q", created.stderr)
	}
	secrets = append(secrets, tok, tok[12:])

	b := &logClient{t: t, base: "http://" + addr, client: &http.Client{Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}

	// A planted session cookie, then sign-in: a wrong password, the right one.
	bogusCookie := planted("cookie")
	if resp, _ := b.do(http.MethodGet, "/inbox", nil, map[string]string{"Cookie": "turnstile_session=" + bogusCookie}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("GET /inbox with a bogus cookie = %d, want 303", resp.StatusCode)
	}
	_, page := b.do(http.MethodGet, "/login", nil, nil)
	csrf := csrfOf(t, page)
	wrong := planted("wrong-password")
	if resp := b.form("/login", url.Values{"csrf_token": {csrf}, "username": {"operator"}, "password": {wrong}}); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with a wrong password = %d, want 401", resp.StatusCode)
	}
	if b.cookie != "" {
		t.Errorf("a failed sign-in started a session (%q)", b.cookie)
	}
	if resp := b.form("/login", url.Values{"csrf_token": {csrf}, "username": {"operator"}, "password": {passwords["operator"]}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login = %d, want 303", resp.StatusCode)
	}
	secrets = append(secrets, bogusCookie, wrong, csrf, b.login, b.cookie)

	// An inbox decision on the demo's refund-agent run.
	var demoRun int64
	if err := db.Get(&demoRun, `SELECT r.id FROM runs r JOIN configurations c ON c.id = r.configuration_id
		WHERE c.identifier = 'refund-agent'`); err != nil {
		t.Fatal(err)
	}
	resp, inbox := b.do(http.MethodGet, "/inbox", nil, nil)
	block := regexp.MustCompile(fmt.Sprintf(`(?s)data-run-id="%d".*?name="turn_digest" value="([0-9a-f]{64})"`, demoRun)).FindStringSubmatch(inbox)
	if resp.StatusCode != http.StatusOK || block == nil {
		t.Fatalf("GET /inbox = %d without a form for run %d:\n%.3000s", resp.StatusCode, demoRun, inbox)
	}
	csrf = csrfOf(t, inbox)
	secrets = append(secrets, csrf)
	if resp := b.form(fmt.Sprintf("/inbox/runs/%d/decision", demoRun), url.Values{"csrf_token": {csrf},
		"turn_digest": {block[1]}, "decision": {"approve"}, "scope": {"once"}, "reason": {"fine"}}); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("inbox decision = %d, want 303", resp.StatusCode)
	}
	waitRunStatus(t, db, demoRun, "completed")

	// The API: refused credentials of every kind, then a run started and
	// approved with the token.
	api := &logClient{t: t, base: b.base, client: b.client}
	unknown, opaque := fakeToken(), planted("opaque")
	basic := base64.StdEncoding.EncodeToString([]byte("operator:" + passwords["operator"]))
	jsonPassword, queryToken := planted("json-password"), planted("query-token")
	secrets = append(secrets, unknown, unknown[4:], opaque, basic, jsonPassword, queryToken)
	for _, auth := range []string{"Bearer " + unknown, "Bearer " + opaque, "Basic " + basic, "bearer " + tok[:20]} {
		if resp, _ := api.do(http.MethodGet, "/api/approvals?token="+queryToken, nil, map[string]string{"Authorization": auth}); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET /api/approvals with %.12s… = %d, want 401", auth, resp.StatusCode)
		}
	}
	bearer := map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}
	if resp, _ := api.do(http.MethodPost, "/api/runs", strings.NewReader(`{"configuration":"refund-agent","prompt":"x","password":"`+jsonPassword+`"}`), bearer); resp.StatusCode/100 != 4 {
		t.Errorf("POST /api/runs with an unknown field = %d, want a 4xx", resp.StatusCode)
	}
	resp, body := api.do(http.MethodPost, "/api/runs", strings.NewReader(`{"configuration":"refund-agent","prompt":"Refund ORD-1001 again"}`), bearer)
	var started struct {
		Run struct {
			ID         int64  `json:"id"`
			Status     string `json:"status"`
			TurnDigest string `json:"turn_digest"`
		} `json:"run"`
	}
	if err := json.Unmarshal([]byte(body), &started); err != nil || resp.StatusCode != http.StatusCreated || started.Run.Status != "waiting_for_approval" {
		t.Fatalf("POST /api/runs = %d %s (%v), want 201 waiting_for_approval", resp.StatusCode, body, err)
	}
	decision := fmt.Sprintf(`{"turn_digest":%q,"decision":"approve"}`, started.Run.TurnDigest)
	if resp, body := api.do(http.MethodPost, fmt.Sprintf("/api/runs/%d/decisions", started.Run.ID), strings.NewReader(decision), bearer); resp.StatusCode/100 != 2 {
		t.Errorf("POST decisions = %d %s, want 2xx", resp.StatusCode, body)
	}
	waitRunStatus(t, db, started.Run.ID, "completed")
	srv.stop(t)

	logs := srv.stderr.String()
	if !logged(srv.logLines(t), "state is encrypted at rest", map[string]any{"sealing_key_id": "k2"}) {
		t.Errorf("no \"state is encrypted at rest\" record naming k2:\n%s", logs)
	}
	for _, secret := range secrets {
		if secret != "" && strings.Contains(logs, secret) {
			t.Errorf("the server's log holds the secret %q", secret)
		}
	}

	// What the server wrote is sealed under the first key, transcripts too.
	var plain int
	if err := db.Get(&plain, `SELECT (SELECT COUNT(*) FROM runs WHERE state NOT LIKE 'tse2:k2:%')
		+ (SELECT COUNT(*) FROM run_messages WHERE body NOT LIKE 'tse2:k2:%')`); err != nil {
		t.Fatal(err)
	}
	if plain != 0 {
		t.Errorf("%d states or messages are not sealed under k2", plain)
	}
}
