package seal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// contentYAML are configurations at the full privacy level, so that event
// payloads carry content too, and every piece of content a run has is
// marked: the prompt (the caller's), the model's text and answer, the
// arguments, and what people type (reasons, input values).
var contentYAML = []string{`
identifier: full-refund
privacy_level: full
provider:
  type: scripted
  script:
    rounds:
      - text: "MODEL-TEXT-MARKER"
        tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}", reason: "ARGUMENT-MARKER"}
      - text: "ANSWER-MARKER"
tools: [refund_order]
`, `
identifier: full-input
privacy_level: full
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: ask_operator, arguments: {question: "QUESTION-MARKER"}}]
      - text: "ANSWER-MARKER"
tools: [ask_operator]
`}

var markers = []string{"PROMPT-MARKER", "MODEL-TEXT-MARKER", "ARGUMENT-MARKER", "ANSWER-MARKER",
	"REASON-MARKER", "INPUT-MARKER", "QUESTION-MARKER"}

// TestEveryStoredCopyOfContentIsSealed: with state keys set, no marker of
// run content is readable anywhere in the database — not in a run's row,
// its transcript, its events, its decisions — after runs are approved,
// denied with a reason, answered, decided on the durable path and carried
// out by a worker, and cancelled. Read through the engine, the same
// content comes back whole.
func TestEveryStoredCopyOfContentIsSealed(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.Configure(t, contentYAML...)
	eng := w.engine(t, entry("A", keyA))
	start := func(cfg string) runtime.Outcome {
		t.Helper()
		out, _ := w.Start(t, testrig.Launch{Configuration: cfg, Prompt: "PROMPT-MARKER refund %s", Engine: eng})
		if !out.Status.Waiting() {
			t.Fatalf("run of %s is %s (%v), want it waiting", cfg, out.Status, out.Err)
		}
		return out
	}
	finish := func(c *runtime.Continuation, err error) runtime.Outcome {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := c.Run(ctx, nil)
		if out.Status != runtime.StatusCompleted {
			t.Fatalf("run %d is %s (%v), want completed", out.RunID, out.Status, out.Err)
		}
		return out
	}

	approved := start("full-refund")
	finish(eng.Decide(ctx, runtime.DecideRequest{RunID: approved.RunID, Digest: approved.Digest,
		Decision: runtime.DecisionApprove, Reason: "REASON-MARKER approve", Actor: w.approver, Path: runtime.PathRequest}))
	denied := start("full-refund")
	finish(eng.Decide(ctx, runtime.DecideRequest{RunID: denied.RunID, Digest: denied.Digest,
		Decision: runtime.DecisionDeny, Reason: "REASON-MARKER deny", Actor: w.approver, Path: runtime.PathRequest}))
	answered := start("full-input")
	finish(eng.SubmitInput(ctx, runtime.InputRequest{RunID: answered.RunID, Digest: answered.Digest,
		Input: json.RawMessage(`{"amount":5,"note":"INPUT-MARKER"}`), Actor: w.approver, Path: runtime.PathRequest}))
	durable := start("full-input")
	if c, err := eng.SubmitInput(ctx, runtime.InputRequest{RunID: durable.RunID, Digest: durable.Digest,
		Input: json.RawMessage(`{"amount":6,"note":"INPUT-MARKER durable"}`), Actor: w.approver, Path: runtime.PathDurable}); c != nil || err != nil {
		t.Fatalf("durable input = %v, %v; want it recorded for a worker", c, err)
	}
	stop := testrig.Work(t, eng, 1, 10*time.Millisecond)
	w.WaitStatus(t, durable.RunID, runtime.StatusCompleted, 10*time.Second)
	stop()
	cancelled := start("full-refund")
	if _, err := eng.Cancel(ctx, cancelled.RunID, w.owner); err != nil {
		t.Fatal(err)
	}

	// Nothing readable anywhere: every column of every row of every table.
	for _, leak := range w.plainText(t, markers) {
		t.Error(leak)
	}

	// Read through the engine, content comes back: the prompt and answer on
	// the run, the events' payloads, and the worker read the durable
	// answer it applied.
	run, _, err := eng.Visible(ctx, approved.RunID, w.owner)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(run.Prompt, "PROMPT-MARKER") || run.Answer != "ANSWER-MARKER" {
		t.Errorf("Visible = prompt %q, answer %q; want them opened", run.Prompt, run.Answer)
	}
	// (An input's value is never in an event; its transcript shows it.)
	for id, want := range map[int64]string{approved.RunID: "REASON-MARKER approve", denied.RunID: "REASON-MARKER deny",
		answered.RunID: "", durable.RunID: "", cancelled.RunID: ""} {
		evs, err := eng.Events(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var all bytes.Buffer
		for _, e := range evs {
			if !json.Valid(e.Payload) {
				t.Errorf("run %d event %d: payload %q is not JSON", id, e.Seq, e.Payload)
			}
			all.Write(e.Payload)
		}
		if !strings.Contains(all.String(), want) {
			t.Errorf("run %d: the events read through the engine do not hold %q: %s", id, want, all.String())
		}
	}

	k := keyring(t, entry("A", keyA))
	for id, want := range map[int64]string{answered.RunID: "INPUT-MARKER", durable.RunID: "INPUT-MARKER durable"} {
		var bodies [][]byte
		if err := w.DB.Select(&bodies, `SELECT body FROM run_messages WHERE run_id = ? ORDER BY idx`, id); err != nil {
			t.Fatal(err)
		}
		var transcript bytes.Buffer
		for i, b := range bodies {
			plain, err := k.Open(b, runtime.MessagePlace(id, i))
			if err != nil {
				t.Fatal(err)
			}
			transcript.Write(plain)
		}
		if !strings.Contains(transcript.String(), want) {
			t.Errorf("run %d: the tool result holds no %q: the answer was not opened before it was applied\n%s", id, want, transcript.String())
		}
	}

	// A process without the key sees that content is sealed, not garbage.
	run, _, err = w.engine(t, entry("B", keyB)).Visible(ctx, approved.RunID, w.owner)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(run.Prompt, "MARKER") || !strings.Contains(run.Prompt, "sealed") {
		t.Errorf("prompt without the key = %q, want a note that it is sealed", run.Prompt)
	}
}

// plainText lists where any marker is readable in the database: every
// text or binary column of every row of every table but the
// configurations, whose scripts are where the markers come from.
func (w *world) plainText(t *testing.T, markers []string) []string {
	t.Helper()
	var cols []struct {
		Table  string `db:"table_name"`
		Column string `db:"column_name"`
	}
	if err := w.DB.Select(&cols, `SELECT table_name AS table_name, column_name AS column_name
		FROM information_schema.columns
		WHERE table_schema = DATABASE() AND table_name <> 'configurations'
			AND data_type IN ('char','varchar','text','mediumtext','longtext','blob','mediumblob','longblob','json')`); err != nil {
		t.Fatal(err)
	}
	var leaks []string
	for _, c := range cols {
		for _, m := range markers {
			var n int
			q := fmt.Sprintf("SELECT COUNT(*) FROM `%s` WHERE INSTR(`%s`, ?) > 0", c.Table, c.Column)
			if err := w.DB.Get(&n, q, []byte(m)); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				leaks = append(leaks, fmt.Sprintf("%s.%s holds %q in %d rows", c.Table, c.Column, m, n))
			}
		}
	}
	return leaks
}
