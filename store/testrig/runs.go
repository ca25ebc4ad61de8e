package testrig

import (
	"context"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Launch is a run for Start to start. Fields left zero take the world's.
type Launch struct {
	Configuration string
	Owner         string         // the owner's user name; "owner" when empty
	Origin        runtime.Origin // interactive when empty
	// Prompt is a format whose %s is a fresh order's id (see the Prompt
	// option); the world's prompt when empty.
	Prompt string
	Engine *runtime.Engine // the world's engine when nil
}

// Start starts a run and runs it in the test until it pauses or settles,
// and returns its outcome and the order its prompt names ("" for none).
// An error starting it, or an outcome with an error, fails the test.
func (w *World) Start(t testing.TB, l Launch) (runtime.Outcome, string) {
	t.Helper()
	eng := l.Engine
	if eng == nil {
		eng = w.Engine
	}
	if l.Owner == "" {
		l.Owner = "owner"
	}
	prompt, order := w.promptFor(t, l.Prompt)
	ctx := context.Background()
	c, err := eng.Start(ctx, runtime.StartRequest{Configuration: l.Configuration, Prompt: prompt,
		Owner: w.Actor(l.Owner), Origin: l.Origin})
	if err != nil {
		t.Fatalf("testrig: start a run of %s: %v", l.Configuration, err)
	}
	out := c.Run(ctx, nil)
	if out.Err != nil {
		t.Fatalf("testrig: run %d of %s: %s, %v", out.RunID, l.Configuration, out.Status, out.Err)
	}
	return out, order
}

// Waiting starts a run of the configuration, owned by owner, on the
// world's engine, and fails the test unless it pauses (for an approval or
// for input).
func (w *World) Waiting(t testing.TB, configuration string) (runtime.Outcome, string) {
	t.Helper()
	out, order := w.Start(t, Launch{Configuration: configuration})
	if !out.Status.Waiting() {
		t.Fatalf("testrig: run %d of %s is %s, want it waiting", out.RunID, configuration, out.Status)
	}
	return out, order
}

// Decide decides a run on the world's engine — approving it when
// req.Decision is empty, as the approver when req.Actor is — and runs the
// continuation in the test. A refusal, or an outcome with an error, fails
// the test.
func (w *World) Decide(t testing.TB, req runtime.DecideRequest) runtime.Outcome {
	t.Helper()
	if req.Decision == "" {
		req.Decision = runtime.DecisionApprove
	}
	if req.Actor.ID == 0 {
		req.Actor = w.Actor("approver")
	}
	ctx := context.Background()
	c, err := w.Engine.Decide(ctx, req)
	if err != nil {
		t.Fatalf("testrig: decide run %d: %v", req.RunID, err)
	}
	out := c.Run(ctx, nil)
	if out.Err != nil {
		t.Fatalf("testrig: run %d after the decision: %s, %v", out.RunID, out.Status, out.Err)
	}
	return out
}

// Approve approves the turn a run paused on, as the approver, and runs the
// continuation (see Decide).
func (w *World) Approve(t testing.TB, paused runtime.Outcome) runtime.Outcome {
	t.Helper()
	return w.Decide(t, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest})
}

// Run reads a run's row; an error, not found included, fails the test.
func (w *World) Run(t testing.TB, id int64) *runtime.Run {
	t.Helper()
	r, err := w.Store.Run(context.Background(), id)
	if err != nil {
		t.Fatalf("testrig: read run %d: %v", id, err)
	}
	return r
}

// WaitRun reads a run until ok says yes and returns it; at the deadline it
// fails the test with what was awaited and the run's last row. It is for
// what another goroutine or process does to the run, which the test has
// no other way to hear of.
func (w *World) WaitRun(t testing.TB, id int64, within time.Duration, what string, ok func(*runtime.Run) bool) *runtime.Run {
	t.Helper()
	var r *runtime.Run
	if !Eventually(within, func() bool { r = w.Run(t, id); return ok(r) }) {
		t.Fatalf("run %d did not become %s within %s: %+v", id, what, within, *r)
	}
	return r
}

// WaitStatus is WaitRun until the run has the status.
func (w *World) WaitStatus(t testing.TB, id int64, status runtime.Status, within time.Duration) *runtime.Run {
	t.Helper()
	return w.WaitRun(t, id, within, string(status), func(r *runtime.Run) bool { return r.Status == status })
}

// pollEvery is how often Eventually asks.
const pollEvery = 20 * time.Millisecond

// Eventually asks ok until it says yes, and reports whether it did within
// the time given. ok runs on the caller's goroutine.
func Eventually(within time.Duration, ok func() bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		if ok() {
			return true
		}
		select {
		case <-deadline.C:
			return ok()
		case <-tick.C:
		}
	}
}

// Work runs loops worker loops of eng in the background, each polling
// every poll when idle, and returns a stop that cancels them and waits
// for them to return. When the test ends the engine is drained first (its
// runs in flight are handed back), then stopped.
func Work(t testing.TB, eng *runtime.Engine, loops int, poll time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		eng.Work(ctx, loops, poll)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("testrig: the worker did not return 10 s after it was stopped")
		}
	}
	t.Cleanup(func() { eng.Drain(); stop() })
	return stop
}
