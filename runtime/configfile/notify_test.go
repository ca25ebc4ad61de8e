package configfile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Lines 8 to 14 are the notify entries.
const notifying = `identifier: refund-agent
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: lookup_order}]
tools: [lookup_order]
notify:
  - url: https://hooks.example.com/turnstile
    secret_env: HOOK_SECRET
    events: [run.waiting, run.settled]
  - url: https://hooks.slack.com/services/T0/B0/XYZ
    format: slack
  - {url: "http://127.0.0.1:9000/hook"}
`

func TestParseNotify(t *testing.T) {
	cfg := mustParse(t, "agent.yaml", notifying)
	want := []runtime.Notify{
		{URL: "https://hooks.example.com/turnstile", SecretEnv: "HOOK_SECRET", Events: []string{"run.waiting", "run.settled"}},
		{URL: "https://hooks.slack.com/services/T0/B0/XYZ", Format: "slack"},
		{URL: "http://127.0.0.1:9000/hook"},
	}
	if !reflect.DeepEqual(cfg.Notify, want) {
		t.Errorf("notify = %+v\nwant %+v", cfg.Notify, want)
	}
	// Export writes the entries back, and they read the same.
	out, err := Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "secret_env: HOOK_SECRET") || !strings.Contains(string(out), "format: slack") {
		t.Errorf("the export lacks the notify entries:\n%s", out)
	}
	if back := mustParse(t, "out.yaml", string(out)); !reflect.DeepEqual(back, cfg) {
		t.Errorf("round trip through\n%s\n got %+v\nwant %+v", out, back, cfg)
	}
}

func TestParseNotifyErrors(t *testing.T) {
	tests := []struct {
		name string
		line int
		with string
		want string
	}{
		{"no url", 9, "  - format: standard", "agent.yaml:9: notify entry 1 needs a url (http or https)"},
		{"empty url", 9, `  - url: ""`, "agent.yaml:9: notify entry 1 needs a url (http or https)"},
		{"ftp", 9, "  - url: ftp://hooks.example.com/x", `agent.yaml:9: notify entry 1: url must be http or https, not "ftp://hooks.example.com/x"`},
		{"no scheme", 9, "  - url: hooks.example.com/x", `agent.yaml:9: notify entry 1: url must be http or https, not "hooks.example.com/x"`},
		{"no host", 9, "  - url: https:///x", `agent.yaml:9: notify entry 1: url "https:///x" has no host`},
		{"unknown event", 11, "    events: [run.waiting, run.finished]",
			`agent.yaml:11: notify entry 1: events: unknown event "run.finished" (allowed: run.waiting, run.settled, run.expired, run.escalated, run.voted)`},
		{"event twice", 11, "    events: [run.waiting, run.waiting]", "agent.yaml:11: notify entry 1: event run.waiting is listed twice (first on line 11)"},
		{"events no list", 11, "    events: run.waiting", "agent.yaml:11: events must be a list of strings"},
		{"unknown format", 13, "    format: teams", `agent.yaml:13: notify entry 2: format must be standard or slack, not "teams"`},
		{"secret itself", 10, "    secret_env: whsec-MIIsecret+/=", "agent.yaml:10: notify entry 1: secret_env must name an environment variable"},
		{"unknown key", 13, "    formt: slack", `agent.yaml:13: unknown key "formt" in notify entry 2 (allowed: url, secret_env, events, format)`},
		{"entry no mapping", 14, "  - http://127.0.0.1:9000/hook", "agent.yaml:14: notify entry 3 must be a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := replaceLine(t, notifying, tt.line, tt.with)
			cfg, err := Parse("agent.yaml", []byte(src), knownTool)
			if err == nil {
				t.Fatalf("Parse: no error for\n%s\nwant %q", src, tt.want)
			}
			if cfg != nil {
				t.Errorf("Parse returned a configuration with its error")
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.want) || strings.Count(got, "\n") != 0 {
				t.Errorf("Parse error:\n got %q\nwant one error starting %q", got, tt.want)
			}
			if strings.Contains(err.Error(), "MIIsecret") {
				t.Errorf("the error repeats what may be a secret: %q", err)
			}
		})
	}

	// notify that is no list.
	src := strings.Replace(notifying, "notify:\n", "notify: https://hooks.example.com\n", 1)
	src = src[:strings.Index(src, "notify:")] + "notify: https://hooks.example.com\n"
	if _, err := Parse("agent.yaml", []byte(src), knownTool); err == nil || err.Error() != "agent.yaml:8: notify must be a list of endpoints, each with a url" {
		t.Errorf("notify as a string: %v", err)
	}
}

// TestParseNotifyReportsEveryError: every broken entry of the file at
// once, in line order.
func TestParseNotifyReportsEveryError(t *testing.T) {
	src := replaceLine(t, notifying, 9, "  - url: ftp://x")
	src = replaceLine(t, src, 11, "    events: [run.done]")
	src = replaceLine(t, src, 13, "    format: teams")
	src = replaceLine(t, src, 14, "  - {secret_env: X}")
	_, err := Parse("agent.yaml", []byte(src), knownTool)
	want := `agent.yaml:9: notify entry 1: url must be http or https, not "ftp://x"` + "\n" +
		`agent.yaml:11: notify entry 1: events: unknown event "run.done" (allowed: run.waiting, run.settled, run.expired, run.escalated, run.voted)` + "\n" +
		`agent.yaml:13: notify entry 2: format must be standard or slack, not "teams"` + "\n" +
		"agent.yaml:14: notify entry 3 needs a url (http or https)"
	if err == nil || err.Error() != want {
		t.Fatalf("Parse error:\n got %v\nwant %s", err, want)
	}
}

func TestNotifyWarnings(t *testing.T) {
	cfg := mustParse(t, "agent.yaml", notifying)
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	// Of a url, the scheme and host only: the path of the Slack one is its
	// credential.
	private := "agent.yaml:14: warning: notify entry 3 (http://127.0.0.1:9000): a loopback address; deliveries are refused unless turnstile serve and work start with --webhook-allow-private"
	want := []string{"agent.yaml:10: warning: notify entry 1 (https://hooks.example.com): environment variable HOOK_SECRET is unset here; deliveries need it where turnstile serve and work run",
		private}
	if got := NotifyWarnings("agent.yaml", []byte(notifying), cfg, getenv); !reflect.DeepEqual(got, want) {
		t.Errorf("warnings with the secret unset:\n got %q\nwant %q", got, want)
	}
	env["HOOK_SECRET"] = "s3cret"
	if got := NotifyWarnings("agent.yaml", []byte(notifying), cfg, getenv); !reflect.DeepEqual(got, []string{private}) {
		t.Errorf("warnings with the secret set: %q, want the private address's alone", got)
	}
	for _, u := range []string{"http://[fd00::1]/h", "http://169.254.169.254/", "http://hooks.localhost:8080/"} {
		src := strings.Replace(notifying, "http://127.0.0.1:9000/hook", u, 1)
		got := NotifyWarnings("agent.yaml", []byte(src), mustParse(t, "agent.yaml", src), getenv)
		if len(got) != 1 || !strings.Contains(got[0], "--webhook-allow-private") {
			t.Errorf("warnings for %s: %q, want one about the private address", u, got)
		}
	}
}

// Configurations that reach Normalize another way (the API, stored ones)
// obey the same rules, without lines.
func TestNormalizeChecksNotify(t *testing.T) {
	for _, tc := range []struct {
		n    runtime.Notify
		want string
	}{
		{runtime.Notify{}, "configuration x: notify 1: url is required"},
		{runtime.Notify{URL: "mailto:ops@example.com"}, `configuration x: notify 1: url must be http or https, not "mailto:ops@example.com"`},
		{runtime.Notify{URL: "https://h/", Events: []string{"run.started"}}, `configuration x: notify 1: events: unknown event "run.started" (allowed: run.waiting, run.settled, run.expired, run.escalated, run.voted)`},
		{runtime.Notify{URL: "https://h/", Events: []string{"run.waiting", "run.waiting"}}, "configuration x: notify 1: events names run.waiting twice"},
		{runtime.Notify{URL: "https://h/", Format: "teams"}, `configuration x: notify 1: format must be standard or slack, not "teams"`},
		{runtime.Notify{URL: "https://h/", SecretEnv: "not a name"}, "configuration x: notify 1: secret_env must name an environment variable (letters, digits and _), not hold the secret itself"},
		{runtime.Notify{URL: "https://h/", SecretEnv: "TURNSTILE_DSN"}, "configuration x: notify 1: secret_env: TURNSTILE_DSN is reserved: a configuration may not read Turnstile's own environment variables (TURNSTILE_*, HTTP_PROXY, HTTPS_PROXY, NO_PROXY)"},
	} {
		cfg := runtime.Configuration{Identifier: "x", Notify: []runtime.Notify{tc.n}}
		if err := cfg.Normalize(); err == nil || err.Error() != tc.want {
			t.Errorf("Normalize of %+v = %v, want %s", tc.n, err, tc.want)
		}
	}
	ok := runtime.Configuration{Identifier: "x", Notify: []runtime.Notify{{URL: "https://h/", Format: "slack", Events: []string{"run.settled"}}}}
	if err := ok.Normalize(); err != nil {
		t.Errorf("Normalize of a sound entry: %v", err)
	}
}
