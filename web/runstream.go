package web

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// stepJSON is one step with its full content, for viewers allowed to see
// it (the playground's admins, the API's run owners).
type stepJSON struct {
	Seq        int             `json:"seq"`
	Kind       string          `json:"kind"`
	Round      int             `json:"round"`
	DurationMS int64           `json:"duration_ms"`
	Content    json.RawMessage `json:"content"`
}

func toStepJSON(s runtime.Step) stepJSON {
	return stepJSON{Seq: s.Seq, Kind: string(s.Kind), Round: s.Round, DurationMS: s.DurationMS, Content: s.Full}
}

// callJSON is a pending call.
type callJSON struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// terminalLine is how a playground-style stream or document ends: done,
// awaiting_approval, awaiting_input, cancelled or error.
func terminalLine(out runtime.Outcome) map[string]any {
	m := map[string]any{"run_id": out.RunID}
	switch {
	case out.Status == runtime.StatusCompleted:
		m["event"] = "done"
		m["answer"], m["iterations"], m["usage"] = out.Answer, out.Iterations, out.Usage
	case out.Status == runtime.StatusWaitingForApproval:
		m["event"], m["turn_digest"] = "awaiting_approval", out.Digest
		m["pending_calls"] = pendingCalls(out.Pending)
		if out.Pending.Note != "" {
			m["note"] = out.Pending.Note
		}
	case out.Status == runtime.StatusWaitingForInput:
		m["event"], m["turn_digest"] = "awaiting_input", out.Digest
		m["schema"] = out.Pending.Schema
		if len(out.Pending.Calls) > 0 { // an input turn asks through exactly one call
			m["tool"] = out.Pending.Calls[0].Name
		}
		m["pending_calls"] = pendingCalls(out.Pending)
	case out.Status == runtime.StatusCancelled:
		m["event"] = "cancelled"
	case out.Status == runtime.StatusDecided || out.Status == runtime.StatusQueued:
		m["event"], m["code"], m["message"] = "error", "handed_over",
			"this server is stopping; a worker finishes the run"
	case out.Status == runtime.StatusFailed:
		m["event"], m["code"], m["message"] = "error", out.Reason, "the run failed: "+out.Reason
	default:
		m["event"], m["code"], m["message"] = "error", "continues_elsewhere",
			"this request lost the run; it continues in the background"
	}
	return m
}

func pendingCalls(t *runtime.PendingTurn) []callJSON {
	calls := make([]callJSON, len(t.Calls))
	for i, c := range t.Calls {
		calls[i] = callJSON{ID: c.ID, Name: c.Name, Arguments: c.Arguments}
	}
	return calls
}

// runContinuation carries a claimed continuation out for the playground
// and the API: as a stream of step lines, keepalives and exactly one
// terminal line when the client asked for NDJSON (stream true), else as one
// JSON document with every step and the outcome. full says whether the
// viewer may read the run's content (its owner, admins): a decider who
// holds only the approve grant gets the steps' kinds and timing and the
// outcome without the answer, as in the inbox. Like the inbox, it goes on
// to the end when the client leaves.
func (s *Server) runContinuation(w http.ResponseWriter, r *http.Request, c *runtime.Continuation, stream, full bool, status int) {
	view := func(line map[string]any) map[string]any {
		if !full {
			delete(line, "answer") // the pending calls stay: deciding them is the point
		}
		return line
	}
	if !stream {
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
		steps, out := collectSteps(r.Context(), c, full)
		s.writeJSON(w, status, map[string]any{"steps": steps, "outcome": view(terminalLine(out))})
		return
	}
	st := s.startStream(w)
	stop := st.keepalives(s.keepalive, func() any { return map[string]string{"event": "keepalive"} })
	defer stop() // also when the continuation panics: no keepalive may follow the handler
	out := c.Run(context.WithoutCancel(r.Context()), runtime.ObserverFunc(func(step runtime.Step) {
		st.send(lineStep, map[string]any{"event": "step", "seq": step.Seq, "step": stepView(step, full)})
	}))
	stop()
	st.send(lineTerminal, view(terminalLine(out)))
}

// collectSteps runs a continuation to its end, on past a client that left,
// and returns its steps, with their content or without.
func collectSteps(ctx context.Context, c *runtime.Continuation, full bool) ([]stepJSON, runtime.Outcome) {
	var mu sync.Mutex
	steps := []stepJSON{}
	out := c.Run(context.WithoutCancel(ctx), runtime.ObserverFunc(func(st runtime.Step) {
		mu.Lock()
		steps = append(steps, stepView(st, full))
		mu.Unlock()
	}))
	return steps, out
}

// stepView is a step with its content, or only its kind and timing.
func stepView(st runtime.Step, full bool) stepJSON {
	j := toStepJSON(st)
	if !full {
		j.Content = nil
	}
	return j
}
