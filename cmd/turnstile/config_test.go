package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

const agentYAML = `identifier: helpdesk
name: Helpdesk agent
system_prompt: You help.
provider:
  type: scripted
  script:
    rounds:
      - text: "Looking."
        tool_calls:
          - name: lookup_order
            arguments: {order_id: "${order_id}"}
      - text: "Done."
tools: [lookup_order, refund_order]
max_iterations: 4
tool_policies:
  refund_order: {grant: refunds}
`

// writeFile writes a file into the test's directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// storedConfigs is the configurations table as a test compares it: every
// row with its definition and its last update.
func storedConfigs(t *testing.T, db *sqlx.DB) []string {
	t.Helper()
	var rows []string
	if err := db.Select(&rows, `SELECT CONCAT(identifier, ' ', active, ' ', CAST(updated_at AS CHAR), ' ', definition)
		FROM configurations ORDER BY identifier`); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestConfigApplyListExport: apply creates, list shows, export writes what
// apply reads back to the same definition, and applying an export again
// writes nothing.
func TestConfigApplyListExport(t *testing.T) {
	db, dsn := dbtest.New(t)
	ctx := context.Background()
	file := writeFile(t, "helpdesk.yaml", agentYAML)

	stdout, stderr, err := turnstile(t, dsn, "config", "apply", file)
	if err != nil || stdout != "configuration helpdesk created\n" {
		t.Fatalf("config apply = %q, %v (stderr %q); want created", stdout, err, stderr)
	}
	if stderr != "" {
		t.Errorf("config apply stderr = %q, want nothing", stderr)
	}

	stdout, _, err = turnstile(t, dsn, "config", "list")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "IDENTIFIER") {
		t.Fatalf("config list = %q, want a header and one row", stdout)
	}
	if got := strings.Fields(lines[1]); !reflect.DeepEqual(got, []string{"helpdesk", "Helpdesk", "agent", "yes", "scripted", "lookup_order,refund_order"}) {
		t.Errorf("config list row = %q", got)
	}

	exported, _, err := turnstile(t, dsn, "config", "export", "helpdesk")
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.New(db).ConfigurationByIdentifier(ctx, "helpdesk")
	if err != nil {
		t.Fatal(err)
	}
	reread, err := configfile.Parse("export.yaml", []byte(exported), nil)
	if err != nil {
		t.Fatalf("the export does not parse: %v\n%s", err, exported)
	}
	reread.ID = stored.ID
	if !reflect.DeepEqual(reread, stored) {
		t.Errorf("export read back:\n got %+v\nwant %+v", reread, stored)
	}

	before := storedConfigs(t, db)
	stdout, _, err = turnstile(t, dsn, "config", "apply", writeFile(t, "export.yaml", exported))
	if err != nil || stdout != "configuration helpdesk unchanged\n" {
		t.Errorf("apply of the export = %q, %v; want unchanged", stdout, err)
	}
	if after := storedConfigs(t, db); !reflect.DeepEqual(after, before) {
		t.Errorf("applying the export changed the table:\nbefore %q\nafter  %q", before, after)
	}

	// An edit is an update of the same row; flags may follow the file.
	edited := strings.Replace(exported, "max_iterations: 4", "max_iterations: 6", 1)
	var out, errOut bytes.Buffer
	err = run(ctx, []string{"config", "apply", "-", "--dsn", dsn}, func(string) string { return "" }, strings.NewReader(edited), &out, &errOut)
	if err != nil || out.String() != "configuration helpdesk updated\n" {
		t.Fatalf("config apply - = %q, %v (stderr %q); want updated", out.String(), err, errOut.String())
	}
	updated, err := store.New(db).ConfigurationByIdentifier(ctx, "helpdesk")
	if err != nil || updated.ID != stored.ID || updated.MaxIterations != 6 {
		t.Errorf("after the update: %+v, %v; want id %d with max_iterations 6", updated, err, stored.ID)
	}

	if _, _, err := turnstile(t, dsn, "config", "export", "nobody"); err == nil || !strings.Contains(err.Error(), `no configuration "nobody"`) {
		t.Errorf("export of an unknown identifier = %v, want no configuration", err)
	}
}

// TestConfigApplyBrokenFile: a file that does not validate is refused with
// its file and line, and the table is left as it was, whether the
// configuration is new or exists.
func TestConfigApplyBrokenFile(t *testing.T) {
	db, dsn := dbtest.New(t)
	if _, _, err := turnstile(t, dsn, "config", "apply", writeFile(t, "helpdesk.yaml", agentYAML)); err != nil {
		t.Fatal(err)
	}
	edit := func(pairs ...string) func(string) string {
		return func(s string) string {
			for i := 0; i+1 < len(pairs); i += 2 {
				s = strings.Replace(s, pairs[i], pairs[i+1], 1)
			}
			return s
		}
	}
	tests := []struct {
		name string
		edit func(string) string
		want string // the error's beginning, "broken.yaml" standing for the path
	}{
		{"yaml syntax", edit("max_iterations: 4", "max_iterations: [4"), "broken.yaml:14: did not find expected ',' or ']'"},
		{"unknown tool", edit("refund_order]", "refund_everything]"), `broken.yaml:13: unknown tool "refund_everything"`},
		{"unknown key", edit("max_iterations: 4", "max_iteration: 4"), `broken.yaml:14: unknown key "max_iteration"`},
		{"wrong type", edit("max_iterations: 4", "max_iterations: four"), "broken.yaml:14: max_iterations must be a whole number"},
		{"timeout under a second", edit("max_iterations: 4", "max_iterations: 4\ndecision_timeout: 500ms"),
			"broken.yaml:15: decision_timeout must be at least 1s, not 500ms"},
		{"escalate without a grant", edit("max_iterations: 4", "max_iterations: 4\ndecision_timeout: 1h\non_timeout: escalate"),
			"broken.yaml:16: escalate_grant is required with on_timeout: escalate"},
		{"forward beside an Authorization header", edit("max_iterations: 4", "max_iterations: 4\nmcp_servers:\n  - name: orders\n    url: https://orders.example/mcp\n    identity: forward\n    headers: {Authorization: Bearer x}"),
			"broken.yaml:18: mcp server orders: identity: forward sends the run's own Authorization header; remove the configured one"},
		{"forward over plain http", edit("max_iterations: 4", "max_iterations: 4\nmcp_servers:\n  - name: orders\n    url: http://orders.example/mcp\n    identity: forward"),
			"broken.yaml:18: mcp server orders: identity: forward needs https for http://orders.example/mcp"},
		{"unknown identity", edit("max_iterations: 4", "max_iterations: 4\nmcp_servers:\n  - name: orders\n    url: https://orders.example/mcp\n    identity: impersonate"),
			`broken.yaml:18: mcp server orders: identity must be none or forward, not "impersonate"`},
		{"identity_ttl under a minute", edit("max_iterations: 4", "max_iterations: 4\nidentity_ttl: 30s"),
			`broken.yaml:15: identity_ttl must be a duration of at least 1m0s ("2h", "90m"), not "30s"`},
		{"new configuration, unknown tool in its script",
			edit("identifier: helpdesk", "identifier: other", "- name: lookup_order", "- name: ask_nobody"),
			`broken.yaml:10: unknown tool "ask_nobody"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := tt.edit(agentYAML)
			if src == agentYAML {
				t.Fatal("the edit changed nothing")
			}
			before := storedConfigs(t, db)
			var count int
			if err := db.Get(&count, `SELECT COUNT(*) FROM configurations`); err != nil {
				t.Fatal(err)
			}
			path := writeFile(t, "broken.yaml", src)
			stdout, _, err := turnstile(t, dsn, "config", "apply", path)
			if err == nil || !strings.HasPrefix(err.Error(), strings.Replace(tt.want, "broken.yaml", path, 1)) {
				t.Fatalf("config apply = %v, want an error starting %q", err, tt.want)
			}
			if stdout != "" {
				t.Errorf("config apply of a broken file printed %q", stdout)
			}
			var after int
			if err := db.Get(&after, `SELECT COUNT(*) FROM configurations`); err != nil {
				t.Fatal(err)
			}
			if after != count || !reflect.DeepEqual(storedConfigs(t, db), before) {
				t.Errorf("a broken file changed the table: %d rows before, %d after", count, after)
			}
		})
	}
}

// TestConfigApplyReportsEveryError: a file with three errors gets all
// three at once, each on a line of its own as "file:line: message" in the
// file's order, and nothing is written.
func TestConfigApplyReportsEveryError(t *testing.T) {
	db, dsn := dbtest.New(t)
	src := strings.NewReplacer("name: Helpdesk agent", "name: [Helpdesk]", "max_iterations: 4", "max_iterations: four",
		"refund_order: {grant: refunds}", "refund_order: {grnt: refunds}").Replace(agentYAML)
	path := writeFile(t, "agent.yaml", src)
	want := path + ":2: name must be a string\n" +
		path + ":14: max_iterations must be a whole number\n" +
		path + `:16: unknown key "grnt" in the policy of refund_order (allowed: requires_approval, grant, approvals_required, decision_timeout, on_timeout, escalate_grant)`
	stdout, _, err := turnstile(t, dsn, "config", "apply", path)
	if err == nil || err.Error() != want {
		t.Errorf("config apply error:\n%v\nwant:\n%s", err, want)
	}
	if stdout != "" {
		t.Errorf("config apply of a broken file printed %q", stdout)
	}
	if rows := storedConfigs(t, db); len(rows) != 0 {
		t.Errorf("a broken file wrote %q", rows)
	}
	got := runBinary(t, childEnv("TURNSTILE_DSN="+dsn), "config", "apply", path)
	if got.code == 0 || got.stderr != "turnstile: "+want+"\n" {
		t.Errorf("turnstile config apply = exit %d, stderr %q; want a failure with\n%s", got.code, got.stderr, want)
	}
}

// TestConfigCommandThroughTheBinary: the error of a broken file reaches
// standard error with its line, and the exit status says it failed.
func TestConfigCommandThroughTheBinary(t *testing.T) {
	_, dsn := dbtest.New(t)
	path := writeFile(t, "agent.yaml", strings.Replace(agentYAML, "refund_order]", "refnd_order]", 1))
	got := runBinary(t, childEnv("TURNSTILE_DSN="+dsn), "config", "apply", path)
	if want := path + `:13: unknown tool "refnd_order"`; got.code == 0 || !strings.Contains(got.stderr, want) {
		t.Errorf("turnstile config apply = exit %d, stderr %q; want a failure naming %q", got.code, got.stderr, want)
	}
	for _, args := range [][]string{{"config"}, {"config", "apply"}, {"config", "list", "extra"}} {
		if got := runBinary(t, childEnv("TURNSTILE_DSN="+dsn), args...); got.code == 0 || !strings.Contains(got.stderr, "usage: turnstile config") {
			t.Errorf("turnstile %s = exit %d, stderr %q; want the usage", strings.Join(args, " "), got.code, got.stderr)
		}
	}
}

// mcpWarnYAML has a server that answers, one whose token variable is
// unset and one on a port nothing listens on; %s are the URLs.
const mcpWarnYAML = `identifier: mcp-warn
provider:
  type: scripted
  script:
    rounds:
      - text: Done.
mcp_servers:
  - name: good
    url: %s
    headers:
      Authorization: Bearer ${GOOD_TOKEN}
  - name: billing
    url: %s
    headers:
      Authorization: Bearer ${BILLING_TOKEN}
  - name: down
    url: %s
    meta_tool: true
`

// TestConfigApplyWarnsAboutMCPServers: apply stores a configuration whose
// MCP servers a run could not reach now, and warns on standard error, with
// the line, about the unset variable and the server that does not answer;
// the server that answers gets no warning, and the exit status is 0.
func TestConfigApplyWarnsAboutMCPServers(t *testing.T) {
	db, dsn := dbtest.New(t)
	server := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "good", Version: "1"}, nil)
	mcpsdk.AddTool(server, &mcpsdk.Tool{Name: "lookup", Description: "Looks up."},
		func(context.Context, *mcpsdk.CallToolRequest, struct{}) (*mcpsdk.CallToolResult, any, error) {
			return &mcpsdk.CallToolResult{}, nil, nil
		})
	good := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return server }, nil))
	t.Cleanup(good.Close)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	path := writeFile(t, "agent.yaml", fmt.Sprintf(mcpWarnYAML, good.URL, good.URL, down))
	wantWarnings := path + ":15: warning: mcp server billing: environment variable BILLING_TOKEN is unset here; runs need it where turnstile serve and work run\n" +
		path + ":17: warning: mcp server down: cannot connect to " + down + ": connection refused\n"

	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		return map[string]string{"TURNSTILE_DSN": dsn, "GOOD_TOKEN": "g00d-token"}[k]
	}
	start := time.Now()
	err = run(context.Background(), []string{"config", "apply", path}, getenv, strings.NewReader(""), &out, &errOut)
	if err != nil || out.String() != "configuration mcp-warn created\n" {
		t.Fatalf("config apply = %q, %v (stderr %q); want created", out.String(), err, errOut.String())
	}
	if took := time.Since(start); took > mcpCheckTimeout {
		t.Errorf("config apply took %s", took)
	}
	if got := errOut.String(); got != wantWarnings {
		t.Errorf("stderr:\n%s\nwant:\n%s", got, wantWarnings)
	}
	if _, err := store.New(db).ConfigurationByIdentifier(context.Background(), "mcp-warn"); err != nil {
		t.Errorf("the configuration was not stored: %v", err)
	}

	// Through the binary: the same warnings, and success.
	got := runBinary(t, childEnv("TURNSTILE_DSN="+dsn, "GOOD_TOKEN=g00d-token"), "config", "apply", path)
	if got.code != 0 || got.stdout != "configuration mcp-warn unchanged\n" || !strings.Contains(got.stderr, wantWarnings) {
		t.Errorf("turnstile config apply = exit %d, stdout %q, stderr %q; want 0, unchanged and the warnings", got.code, got.stdout, got.stderr)
	}
}

func TestMCPLines(t *testing.T) {
	const y = `identifier: x
mcp_servers:
  - name: shop
    url: https://${SHOP_HOST}/mcp
    headers:
      Authorization: Bearer ${SHOP_TOKEN}
      X-Again: ${SHOP_TOKEN}
  - url: ${CRM_URL}
    name: crm
`
	got := mcpLines([]byte(y))
	want := map[string]serverLines{
		"shop": {entry: 3, url: 4, vars: map[string]int{"SHOP_HOST": 4, "SHOP_TOKEN": 6}},
		"crm":  {entry: 8, url: 8, vars: map[string]int{"CRM_URL": 8}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("mcpLines = %+v, want %+v", got, want)
	}
	if got := (serverLines{}).position("f.yaml", 0); got != "f.yaml" {
		t.Errorf("position without a line = %q, want the file alone", got)
	}
}
