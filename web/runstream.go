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
// and the API: as a stream of step lines with their content, keepalives
// and exactly one terminal line when the client asked for NDJSON (stream
// true), else as one JSON document with every step and the outcome. Like
// the inbox, it goes on to the end when the client leaves.
func (s *Server) runContinuation(w http.ResponseWriter, r *http.Request, c *runtime.Continuation, stream bool, status int) {
	ctx := context.WithoutCancel(r.Context())
	if !stream {
		http.NewResponseController(w).SetWriteDeadline(time.Time{})
		var mu sync.Mutex
		steps := []stepJSON{}
		out := c.Run(ctx, runtime.ObserverFunc(func(st runtime.Step) {
			mu.Lock()
			steps = append(steps, toStepJSON(st))
			mu.Unlock()
		}))
		s.writeJSON(w, status, map[string]any{"steps": steps, "outcome": terminalLine(out)})
		return
	}
	st := s.startStream(w)
	stop := st.keepalives(s.keepalive, func() any { return map[string]string{"event": "keepalive"} })
	out := c.Run(ctx, runtime.ObserverFunc(func(step runtime.Step) {
		st.send(lineStep, map[string]any{"event": "step", "seq": step.Seq, "step": toStepJSON(step)})
	}))
	stop()
	st.send(lineTerminal, terminalLine(out))
}
