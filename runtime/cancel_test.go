package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// cancelWithin is how soon a cancel must end a run that is inside a call
// (SPEC §12.2), on this process or another.
const cancelWithin = time.Second

// blocking is a tool whose every call says it started, then waits until
// release is closed: for its context too, unless it ignores it.
type blocking struct {
	name    string
	effect  runtime.Effect
	ignores bool
	started chan struct{}
	release chan struct{}
}

func newBlocking(name string, effect runtime.Effect, ignores bool) *blocking {
	return &blocking{name: name, effect: effect, ignores: ignores, started: make(chan struct{}, 8), release: make(chan struct{})}
}

func (b *blocking) Spec() runtime.ToolSpec {
	no := false
	return runtime.ToolSpec{Name: b.name, Description: "waits", Effect: b.effect, RequiresApproval: &no,
		Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (b *blocking) Call(ctx context.Context, _ runtime.Invocation) (string, error) {
	b.started <- struct{}{}
	if b.ignores {
		<-b.release
		return "late result", nil
	}
	select {
	case <-ctx.Done():
		return "", fmt.Errorf("%s: %w", b.name, ctx.Err())
	case <-b.release:
		return "done", nil
	}
}

// blockingYAML is a configuration whose first round calls tool and whose
// second answers (never reached when a cancel cuts the call short).
func blockingYAML(identifier, tool string) string {
	return fmt.Sprintf(`
identifier: %s
privacy_level: full
provider:
  type: scripted
  script:
    rounds:
      - text: "Working."
        tool_calls: [{name: %s, arguments: {}}]
      - text: "never reached"
tools: [%s]
`, identifier, tool, tool)
}

// logBuffer is a log a test reads while the engine writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cancelWorld is a world with the blocking tools, whose configurations
// notify testEndpoints, with its engine's log in log.
type cancelWorld struct {
	*testrig.World
	log                  *logBuffer
	reads, writes, stuck *blocking
}

func newCancelWorld(t *testing.T, providers runtime.ProviderFactory, yamls ...string) *cancelWorld {
	t.Helper()
	cw := &cancelWorld{log: &logBuffer{},
		reads:  newBlocking("blocks_read", runtime.ReadOnly, false),
		writes: newBlocking("blocks_write", runtime.NonIdempotentWrite, false),
		stuck:  newBlocking("ignores_context", runtime.NonIdempotentWrite, true)}
	t.Cleanup(func() { close(cw.stuck.release) })
	cw.World = testrig.New(t, testrig.Configs(yamls...), testrig.Tools(cw.reads, cw.writes, cw.stuck),
		testrig.Engine(runtime.Options{Logger: slog.New(slog.NewTextHandler(cw.log, nil)), Providers: providers, PublicURL: publicURL}))
	cfgs, err := cw.Store.Configurations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfgs {
		cw.SetNotify(t, c.Identifier, testEndpoints)
	}
	return cw
}

// running starts a run of the configuration on its own goroutine and
// returns it with a channel of its outcome.
func (w *cancelWorld) running(t *testing.T, configuration string) (int64, <-chan runtime.Outcome) {
	t.Helper()
	c, err := w.Engine.Start(context.Background(), runtime.StartRequest{Configuration: configuration, Prompt: "go", Owner: w.Actor("owner")})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan runtime.Outcome, 1)
	go func() { done <- c.Run(context.Background(), nil) }()
	return c.RunID(), done
}

// cancelNow cancels the run through engine e as its owner and returns how
// long until its continuation settled it.
func (w *cancelWorld) cancelNow(t *testing.T, e *runtime.Engine, id int64, done <-chan runtime.Outcome) (runtime.Outcome, time.Duration) {
	t.Helper()
	start := time.Now()
	res, err := e.Cancel(context.Background(), id, w.Actor("owner"))
	if err != nil || res.Status != runtime.StatusRunning {
		t.Fatalf("cancel = %+v, %v; want a request to the running holder", res, err)
	}
	select {
	case out := <-done:
		return out, time.Since(start)
	case <-time.After(10 * time.Second):
		t.Fatalf("run %d was not settled 10 s after its cancel", id)
	}
	return runtime.Outcome{}, 0
}

// wantCancelledNow fails the test unless the run settled as cancelled
// within cancelWithin, with a cancel, its turn's end and one settle last,
// and a run.settled notification.
func (w *cancelWorld) wantCancelledNow(t *testing.T, id int64, out runtime.Outcome, took time.Duration) []runtime.Event {
	t.Helper()
	if out.Status != runtime.StatusCancelled || out.Err != nil {
		t.Fatalf("outcome = %+v, want cancelled", out)
	}
	if took > cancelWithin {
		t.Errorf("the cancel took %s to settle the run, want at most %s", took, cancelWithin)
	}
	if r := w.Run(t, id); r.Status != runtime.StatusCancelled || r.TerminationReason != runtime.ReasonCancelled || r.PendingEffect != "" {
		t.Errorf("run is %s (%q), pending effect %q; want cancelled, none", r.Status, r.TerminationReason, r.PendingEffect)
	}
	evs := w.Gapless(t, id)
	k := kinds(evs)
	if n := len(k); n < 3 || k[n-3] != runtime.KindCancel || k[n-2] != runtime.KindTurnEnded || k[n-1] != runtime.KindSettle ||
		testrig.CountKind(evs, runtime.KindSettle) != 1 {
		t.Errorf("events %v, want one settle after a cancel at the end", k)
	}
	var settled int
	for _, row := range w.Outbox(t, id) {
		if row.Event == runtime.EventRunSettled {
			settled++
			if b := decodeBody(t, row.Body); b.Data["status"] != string(runtime.StatusCancelled) {
				t.Errorf("run.settled says %v, want cancelled", b.Data["status"])
			}
		}
	}
	if settled != 1 {
		t.Errorf("%d run.settled notifications, want 1", settled)
	}
	return evs
}

// toolEvent decodes the run's tool event.
func toolEvent(t *testing.T, evs []runtime.Event) runtime.ToolPayload {
	t.Helper()
	for _, e := range evs {
		if e.Kind == runtime.KindTool {
			var p runtime.ToolPayload
			if err := runtime.DecodePayload(e.Payload, &p); err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	t.Fatalf("no tool event among %v", kinds(evs))
	return runtime.ToolPayload{}
}

// lastMessage is the run's last transcript message.
func (w *cancelWorld) lastMessage(t *testing.T, id int64) runtime.ConversationMessage {
	t.Helper()
	page, err := w.Engine.Conversation(context.Background(), id, w.Actor("owner"), runtime.MessageQuery{Limit: runtime.MaxMessagePage})
	if err != nil || len(page.Messages) == 0 {
		t.Fatalf("conversation: %d messages, %v", len(page.Messages), err)
	}
	return page.Messages[len(page.Messages)-1]
}

// TestCancelStopsAToolCallAtOnce: a cancel on the holding process ends
// the tool call's context; a read is answered as cancelled, a write as
// interrupted (never repeated), the pending effect cleared, and the run
// settles within a second, notifying run.settled.
func TestCancelStopsAToolCallAtOnce(t *testing.T) {
	w := newCancelWorld(t, nil, blockingYAML("reads", "blocks_read"), blockingYAML("writes", "blocks_write"))
	for _, tc := range []struct {
		configuration string
		tool          *blocking
		interrupted   bool
		note          string
	}{
		{"reads", w.reads, false, "cancelled: the run was cancelled during the call"},
		{"writes", w.writes, true, "interrupted: the run was cancelled during the call; its effect is unknown"},
	} {
		t.Run(tc.configuration, func(t *testing.T) {
			id, done := w.running(t, tc.configuration)
			<-tc.tool.started
			out, took := w.cancelNow(t, w.Engine, id, done)
			evs := w.wantCancelledNow(t, id, out, took)
			if p := toolEvent(t, evs); !p.IsError || p.Interrupted != tc.interrupted || p.Result.Value != tc.note {
				t.Errorf("tool event = %+v, want an error %q, interrupted %v", p, tc.note, tc.interrupted)
			}
			if m := w.lastMessage(t, id); m.Role != "tool" || m.Text.Value != tc.note || !m.IsError {
				t.Errorf("last message = %s %v, want the call's result %q", m.Role, m.Text.Value, tc.note)
			}
		})
	}
}

// TestCancelThroughAnotherProcessStopsTheCall: the cancel is asked through
// another engine (another process on the same database); the holder's
// lease keeper sees the flag and stops the call within a second.
func TestCancelThroughAnotherProcessStopsTheCall(t *testing.T) {
	w := newCancelWorld(t, nil, blockingYAML("reads", "blocks_read"))
	other := w.NewEngine(runtime.Options{})
	id, done := w.running(t, "reads")
	<-w.reads.started
	out, took := w.cancelNow(t, other, id, done)
	w.wantCancelledNow(t, id, out, took)
}

// TestCancelDoesNotWaitForAToolThatIgnoresItsContext: a write that never
// looks at its context does not hold the run: it settles, the write is
// recorded as interrupted, and its late result is dropped and logged,
// adding nothing to the run.
func TestCancelDoesNotWaitForAToolThatIgnoresItsContext(t *testing.T) {
	w := newCancelWorld(t, nil, blockingYAML("stuck", "ignores_context"))
	id, done := w.running(t, "stuck")
	<-w.stuck.started
	out, took := w.cancelNow(t, w.Engine, id, done)
	evs := w.wantCancelledNow(t, id, out, took)
	if p := toolEvent(t, evs); !p.Interrupted {
		t.Errorf("tool event = %+v, want interrupted", p)
	}
	w.stuck.release <- struct{}{} // the call returns now, long after the settle
	if !testrig.Eventually(5*time.Second, func() bool {
		return strings.Contains(w.log.String(), "result of a cancelled run's tool call dropped")
	}) {
		t.Errorf("the late result was not logged; log:\n%s", w.log)
	}
	if after := w.Gapless(t, id); len(after) != len(evs) {
		t.Errorf("events after the late result: %v, want %v", kinds(after), kinds(evs))
	}
}

// halfAnswer streams a few words of its answer, then waits for its
// context, as a slow model mid-stream.
type halfAnswer struct{ streaming chan struct{} }

func (h halfAnswer) Round(ctx context.Context, _ runtime.RoundRequest, onDelta func(runtime.Delta)) (runtime.RoundResult, error) {
	onDelta(runtime.Delta{Text: "The answer "})
	onDelta(runtime.Delta{Text: "so far"})
	h.streaming <- struct{}{}
	<-ctx.Done()
	return runtime.RoundResult{}, fmt.Errorf("half: %w", ctx.Err())
}

// TestCancelKeepsTheTextAModelStreamed: a cancel during a model round
// ends the round's context; the text streamed so far is the model's last
// message (without calls, so the transcript stays one a later turn can
// send) and a round event marked cancelled.
func TestCancelKeepsTheTextAModelStreamed(t *testing.T) {
	model := halfAnswer{streaming: make(chan struct{}, 1)}
	w := newCancelWorld(t, func(*runtime.Configuration) (runtime.Provider, error) { return model, nil },
		blockingYAML("talks", "blocks_read"))
	id, done := w.running(t, "talks")
	<-model.streaming
	out, took := w.cancelNow(t, w.Engine, id, done)
	evs := w.wantCancelledNow(t, id, out, took)
	var round runtime.LLMPayload
	for _, e := range evs {
		if e.Kind == runtime.KindLLM {
			if err := runtime.DecodePayload(e.Payload, &round); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !round.Cancelled || round.Text.Value != "The answer so far" || len(round.ToolCalls) != 0 {
		t.Errorf("round event = %+v, want the streamed text, cancelled, no calls", round)
	}
	if m := w.lastMessage(t, id); m.Role != "assistant" || m.Text.Value != "The answer so far" || len(m.ToolCalls) != 0 {
		t.Errorf("last message = %s %v %v, want the model's partial answer", m.Role, m.Text.Value, m.ToolCalls)
	}
}

// TestCancelBeforeAnyTextRecordsNoRound: a round cancelled before the
// model wrote anything leaves no message and no round event behind.
func TestCancelBeforeAnyTextRecordsNoRound(t *testing.T) {
	entered := make(chan struct{}, 1)
	silent := providerFunc(func(ctx context.Context, _ runtime.RoundRequest, _ func(runtime.Delta)) (runtime.RoundResult, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return runtime.RoundResult{}, ctx.Err()
	})
	w := newCancelWorld(t, func(*runtime.Configuration) (runtime.Provider, error) { return silent, nil },
		blockingYAML("silent", "blocks_read"))
	id, done := w.running(t, "silent")
	<-entered
	out, took := w.cancelNow(t, w.Engine, id, done)
	evs := w.wantCancelledNow(t, id, out, took)
	if n := testrig.CountKind(evs, runtime.KindLLM); n != 0 {
		t.Errorf("%d round events, want none", n)
	}
	if m := w.lastMessage(t, id); m.Role != "user" {
		t.Errorf("last message is the %s's, want the prompt", m.Role)
	}
}

// providerFunc is a Provider of one function.
type providerFunc func(ctx context.Context, req runtime.RoundRequest, onDelta func(runtime.Delta)) (runtime.RoundResult, error)

func (f providerFunc) Round(ctx context.Context, req runtime.RoundRequest, onDelta func(runtime.Delta)) (runtime.RoundResult, error) {
	return f(ctx, req, onDelta)
}
