package configfile

import (
	"fmt"
	"net/url"

	"go.yaml.in/yaml/v3"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/internal/yamlnode"
	"github.com/turnstile-dev/turnstile/runtime/webhook"
)

var notifyKeys = []string{"url", "secret_env", "events", "format"}

// notify reads `notify`, each error at the line of the key or value it is
// about; only entries that read without an error are returned, so
// Normalize (which checks the same rules) never reports one again without
// a line.
func (p *parser) notify(e entry) []runtime.Notify {
	if yamlnode.IsNull(e.value) {
		return nil
	}
	if e.value.Kind != yaml.SequenceNode {
		p.fail(e.value, "notify must be a list of endpoints, each with a url")
		return nil
	}
	var out []runtime.Notify
	for i, n := range e.value.Content {
		if ep, ok := p.notifyEntry(yamlnode.Resolve(n), i+1); ok {
			out = append(out, ep)
		}
	}
	return out
}

// notifyEntry reads entry number i (from 1) of `notify`; ok is false when
// it has an error.
func (p *parser) notifyEntry(n *yaml.Node, i int) (runtime.Notify, bool) {
	var ep runtime.Notify
	before := len(p.errs)
	what := fmt.Sprintf("notify entry %d", i)
	fields, ok := p.mapping(n, what, notifyKeys...)
	if !ok {
		return ep, false
	}
	f, ok := fields["url"]
	if ok {
		ep.URL, _ = p.str(f)
	}
	switch {
	case ok && f.value.Kind != yaml.ScalarNode, !ok && p.misspelt[n]: // said already
	case ep.URL == "":
		p.fail(n, "%s needs a url (http or https)", what)
	default:
		if err := runtime.CheckNotifyURL(ep.URL); err != nil {
			p.fail(f.value, "%s: %s", what, err.Error())
		}
	}
	if f, ok := fields["secret_env"]; ok {
		ep.SecretEnv, _ = p.str(f)
		if err := runtime.CheckSecretEnv(ep.SecretEnv); err != nil {
			p.fail(f.value, "%s: %s", what, err.Error())
		}
	}
	if f, ok := fields["events"]; ok {
		list, nodes, ok := p.stringList(f)
		seen := map[string]int{}
		for j, ev := range list {
			if !ok {
				break
			}
			if err := runtime.CheckNotifyEvent(ev); err != nil {
				p.fail(nodes[j], "%s: %s", what, err.Error())
				continue
			}
			if line, dup := seen[ev]; dup {
				p.fail(nodes[j], "%s: event %s is listed twice (first on line %d)", what, ev, line)
				continue
			}
			seen[ev] = nodes[j].Line
			ep.Events = append(ep.Events, ev)
		}
	}
	if f, ok := fields["format"]; ok {
		ep.Format, _ = p.str(f)
		if err := runtime.CheckNotifyFormat(ep.Format); err != nil {
			p.fail(f.value, "%s: %s", what, err.Error())
		}
	}
	return ep, len(p.errs) == before
}

// NotifyWarnings are the warnings about a parsed configuration file's
// notify entries, one "file:line: warning: …" each: a url whose host is an
// address the workers refuse unless started with --webhook-allow-private
// (a loopback, private or link-local address written out; a name is only
// checked when it is dialled), and a secret_env that is unset in this
// environment (getenv answers ""). Deliveries read the secret and check
// the address where turnstile serve and work run, so this refuses
// nothing; it is what a person can still fix before a delivery goes out
// unsigned or fails. A warning names the variable, never a value, and of
// the url only its scheme and host.
func NotifyWarnings(filename string, data []byte, cfg *runtime.Configuration, getenv func(string) string) []string {
	if len(cfg.Notify) == 0 {
		return nil
	}
	urlLines, secretLines := notifyLines(data, "url"), notifyLines(data, "secret_env")
	at := func(lines []int, i int) string {
		if i < len(lines) && lines[i] > 0 {
			return fmt.Sprintf("%s:%d", filename, lines[i])
		}
		return filename
	}
	var out []string
	for i, n := range cfg.Notify {
		target := runtime.NotifyTarget(n.URL)
		if u, err := url.Parse(n.URL); err == nil {
			if why := webhook.LiteralRefusal(u.Hostname()); why != "" {
				out = append(out, fmt.Sprintf("%s: warning: notify entry %d (%s): %s; deliveries are refused unless turnstile serve and work start with --webhook-allow-private",
					at(urlLines, i), i+1, target, why))
			}
		}
		if n.SecretEnv == "" || getenv(n.SecretEnv) != "" {
			continue
		}
		out = append(out, fmt.Sprintf("%s: warning: notify entry %d (%s): environment variable %s is unset here; deliveries need it where turnstile serve and work run",
			at(secretLines, i), i+1, target, n.SecretEnv))
	}
	return out
}

// notifyLines is the line of each notify entry's value of key (of the
// entry when it has none), in order. Parse has read the file already, so
// every entry is a mapping here.
func notifyLines(data []byte, key string) []int {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil {
		return nil
	}
	root := yamlnode.Resolve(&doc)
	if root.Kind != yaml.MappingNode {
		return nil
	}
	var list *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "notify" {
			list = yamlnode.Resolve(root.Content[i+1])
		}
	}
	if list == nil || list.Kind != yaml.SequenceNode {
		return nil
	}
	out := make([]int, len(list.Content))
	for i, n := range list.Content {
		n = yamlnode.Resolve(n)
		out[i] = n.Line
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				out[i] = n.Content[j+1].Line
			}
		}
	}
	return out
}
