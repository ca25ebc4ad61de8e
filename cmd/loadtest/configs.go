package main

import (
	"fmt"
	"time"
)

// The load configurations, by the phase that uses them: "hold" (streams:
// a continuation stays open for --hold), "first-line" (held for
// --first-line-hold, so that a burst's continuations do not finish while
// later decisions of the burst still wait for their first line) and
// "quick" (durable: nothing to wait for) and "burst" (held for
// --burst-hold, over which its streams' silences are timed).
const (
	configHold      = "hold"
	configFirstLine = "first-line"
	configQuick     = "quick"
	configBurst     = "burst"
)

var configNames = []string{configHold, configFirstLine, configQuick, configBurst}

// holdIdentifier names a load configuration after its hold, so that
// changing --hold never changes the script of runs already waiting.
func holdIdentifier(hold time.Duration) string {
	if hold == 0 {
		return "loadtest-quick"
	}
	return fmt.Sprintf("loadtest-hold-%ds", int(hold/time.Second))
}

// configHoldOf is how long a configuration's continuation works silently.
func (o *options) configHoldOf(which string) time.Duration {
	switch which {
	case configHold:
		return o.hold
	case configFirstLine:
		return o.firstLineHold
	case configBurst:
		return o.burstHold
	}
	return 0
}

// configID is the identifier of a load configuration.
func (o *options) configID(which string) string { return holdIdentifier(o.configHoldOf(which)) }

// configYAML returns the identifier and YAML of a load configuration.
func (o *options) configYAML(which string) (identifier, yaml string) {
	hold := o.configHoldOf(which)
	id := holdIdentifier(hold)
	return id, loadConfigYAML(id, int(hold/time.Second))
}

// loadConfigYAML is a load configuration in the format of "turnstile
// config apply": one round that calls slow_task, which needs an approval
// here (a tool policy), then a final answer. After the approval a
// continuation records four steps — the approval, the tool, the round and
// the settle — and between the first two it stays silent for the given
// seconds, which only keepalive lines bridge. max_iterations and the
// privacy level keep each step small.
func loadConfigYAML(identifier string, seconds int) string {
	return fmt.Sprintf(`identifier: %s
name: Load test (%d s hold)
active: true
system_prompt: You wait for approval, then work silently.
provider:
  type: scripted
  script:
    rounds:
      - text: "Working on it; this needs a person."
        tool_calls:
          - name: slow_task
            arguments: {seconds: %d, label: "load test hold"}
      - text: "Done."
tools: [slow_task]
tool_policies:
  slow_task:
    requires_approval: true
max_iterations: 3
privacy_level: metadata
`, identifier, seconds, seconds)
}
