package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// maxSlowSeconds bounds slow_task, as its schema states.
const maxSlowSeconds = 120

const slowTaskParams = `{
  "type": "object",
  "properties": {
    "seconds": {"type": "number", "minimum": 0, "maximum": 120, "description": "How long to work, in seconds."},
    "label": {"type": "string", "description": "What the task is, for the transcript."}
  },
  "required": ["seconds"],
  "additionalProperties": false
}`

// SlowTask is the slow_task tool: it works silently for a given time and
// reports only when done. The demo's slow agent uses it for a 30-second tool
// call that produces nothing a stream could forward, which only keepalive
// lines bridge.
type SlowTask struct{}

// Spec describes slow_task: read-only, arguments {"seconds": number 0..120,
// "label": string}.
func (SlowTask) Spec() runtime.ToolSpec {
	return runtime.ToolSpec{
		Name:        NameSlowTask,
		Description: "Work on something for the given number of seconds without any output, then report.",
		Parameters:  json.RawMessage(slowTaskParams),
		Effect:      runtime.ReadOnly,
	}
}

// Call sleeps for seconds and returns {"slept_seconds": seconds}. Invalid
// arguments are an error, and so is ctx ending first (wrapping ctx.Err()).
func (SlowTask) Call(ctx context.Context, inv runtime.Invocation) (string, error) {
	var args struct {
		Seconds *float64 `json:"seconds"`
		Label   string   `json:"label"`
	}
	if err := decodeArgs(NameSlowTask, inv.Arguments, &args); err != nil {
		return "", err
	}
	if args.Seconds == nil {
		return "", fmt.Errorf("%s: invalid arguments: seconds is required", NameSlowTask)
	}
	secs := *args.Seconds
	if math.IsNaN(secs) || secs < 0 || secs > maxSlowSeconds {
		return "", fmt.Errorf("%s: invalid arguments: seconds must be between 0 and %d, not %v", NameSlowTask, maxSlowSeconds, secs)
	}
	// A context that ended already must lose even against a zero wait,
	// which select alone would decide at random.
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s: stopped before it started: %w", NameSlowTask, err)
	}
	timer := time.NewTimer(time.Duration(secs * float64(time.Second)))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return "", fmt.Errorf("%s: stopped before %v seconds passed: %w", NameSlowTask, secs, ctx.Err())
	}
	return resultJSON(struct {
		SleptSeconds float64 `json:"slept_seconds"`
	}{secs})
}
