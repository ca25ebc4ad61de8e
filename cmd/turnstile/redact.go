package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
)

// redacted replaces a credential in a log record.
const redacted = "[REDACTED]"

// sensitiveKeys are attribute and group names whose values are always
// credentials, compared after lower-casing and mapping '-', '.' and ' ' to
// '_'.
var sensitiveKeys = map[string]bool{
	"authorization": true, "proxy_authorization": true, "cookie": true, "set_cookie": true,
	"password": true, "passwd": true, "token": true, "api_key": true, "apikey": true,
	"key": true, "secret": true, "bearer": true, "credentials": true,
	strings.ToLower(stateKeysVar): true, "state_keys": true,
}

// sensitiveSuffixes catch the compound names: csrf_token, client_secret,
// new_password, x_api_key, session_cookie. A plural (input_tokens, a count)
// is no credential and keeps its value.
var sensitiveSuffixes = []string{"_token", "_secret", "_password", "_passwd", "_key", "_apikey", "_cookie"}

func sensitiveKey(k string) bool {
	k = strings.NewReplacer("-", "_", ".", "_", " ", "_").Replace(strings.ToLower(k))
	if sensitiveKeys[k] {
		return true
	}
	for _, s := range sensitiveSuffixes {
		if strings.HasSuffix(k, s) {
			return true
		}
	}
	return false
}

// A secretPattern finds a credential inside free text (a message, an
// error, a header copied into a string); hint is a lower-case substring
// the text must contain for the pattern to be worth trying.
type secretPattern struct {
	hint string
	re   *regexp.Regexp
	repl string
}

var secretPatterns = []secretPattern{
	// API tokens; the 8-digit prefix that "token list" shows stays
	// readable, anything longer is taken for the token.
	{"tst_", regexp.MustCompile(`tst_[0-9A-Fa-f]{16,}`), "tst_" + redacted},
	// Run credentials, sent to MCP servers with identity: forward: never
	// shown anywhere, not even in part.
	{"tsr_", regexp.MustCompile(`tsr_[0-9A-Fa-f]{8,}`), "tsr_" + redacted},
	// A bearer credential of any issuer; eight characters at least, so that
	// "bearer token" in prose stays as it is.
	{"bearer", regexp.MustCompile(`(?i)\b(bearer)\s+[A-Za-z0-9\-._~+/]{8,}=*`), "$1 " + redacted},
	// OpenAI-style provider keys.
	{"sk-", regexp.MustCompile(`\bsk-[A-Za-z0-9_\-]{20,}`), "sk-" + redacted},
	// The session cookie by name, and name=value pairs of a form or a
	// query string: password=…&csrf_token=….
	{"turnstile_session", regexp.MustCompile(`(turnstile_session=)[^\s;,&"]+`), "${1}" + redacted},
	{"=", regexp.MustCompile(`(?i)((?:password|passwd|secret|token|api_key|apikey)=)[^\s;,&"]+`), "${1}" + redacted},
	// The same keys in JSON text: {"password":"…"}.
	{`"`, regexp.MustCompile(`(?i)("(?:password|passwd|secret|token|api_key|apikey|authorization|cookie)"\s*:\s*)"(?:[^"\\]|\\.)*"`), `${1}"` + redacted + `"`},
	// Passwords in URLs and in go-sql-driver DSNs: user:pass@host,
	// user:pass@tcp(host).
	{"://", regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]*):[^\s@/]*@`), "${1}:" + redacted + "@"},
	{"@", regexp.MustCompile(`([^\s:/@"'(]+):\S*@((?:tcp6?|unix)\()`), "${1}:" + redacted + "@${2}"},
}

// scrub removes every credential secretPatterns find in s.
func scrub(s string) string {
	var lower string
	for _, p := range secretPatterns {
		if lower == "" {
			lower = strings.ToLower(s)
		}
		if strings.Contains(lower, p.hint) {
			s = p.re.ReplaceAllString(s, p.repl)
			lower = ""
		}
	}
	return s
}

// redactAttr is the loggers' ReplaceAttr: it keeps credentials out of every
// log line. The value of an attribute named like a credential (see
// sensitiveKey), or inside a group so named, is replaced whole; in every
// other text, the message included, the patterns of secretPatterns are.
// slog calls it for every attribute, nested groups and WithAttrs included,
// after resolving LogValuers.
func redactAttr(groups []string, a slog.Attr) slog.Attr {
	if groups == nil {
		switch a.Key {
		case slog.TimeKey, slog.LevelKey, slog.SourceKey:
			return a
		}
	}
	for _, g := range groups {
		if sensitiveKey(g) {
			return slog.String(a.Key, redacted)
		}
	}
	if sensitiveKey(a.Key) {
		return slog.String(a.Key, redacted)
	}
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); s != "" {
			return slog.String(a.Key, scrub(s))
		}
	case slog.KindAny:
		return slog.Attr{Key: a.Key, Value: redactAny(a.Value.Any())}
	}
	return a
}

// redactAny redacts a value the JSON handler would marshal: an error as its
// text, anything else (a header map, a struct) through its JSON, redacting
// by key and by pattern, and as it was when nothing needs redacting.
func redactAny(v any) slog.Value {
	if b, ok := v.([]byte); ok {
		if s := scrub(string(b)); s != string(b) {
			return slog.StringValue(s)
		}
		return slog.AnyValue(v)
	}
	if err, ok := v.(error); ok {
		if _, marshals := v.(json.Marshaler); !marshals {
			return slog.StringValue(scrub(err.Error()))
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return slog.AnyValue(v) // the handler reports that it cannot log it
	}
	dec := json.NewDecoder(&buf)
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return slog.AnyValue(v)
	}
	tree, changed := redactTree(tree)
	if !changed {
		return slog.AnyValue(v)
	}
	out, err := json.Marshal(tree)
	if err != nil {
		return slog.StringValue(redacted)
	}
	return slog.AnyValue(json.RawMessage(out))
}

// redactTree redacts decoded JSON in place and reports whether it changed.
func redactTree(v any) (any, bool) {
	switch t := v.(type) {
	case string:
		s := scrub(t)
		return s, s != t
	case []any:
		changed := false
		for i, e := range t {
			var c bool
			if t[i], c = redactTree(e); c {
				changed = true
			}
		}
		return t, changed
	case map[string]any:
		changed := false
		for k, e := range t {
			if sensitiveKey(k) {
				t[k], changed = redacted, true
				continue
			}
			var c bool
			if t[k], c = redactTree(e); c {
				changed = true
			}
		}
		return t, changed
	}
	return v, false
}
