package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// chattyYAML answers every turn in three slow rounds that only read: a
// turn killed in the middle is carried on by a worker from its last step.
const chattyYAML = `
identifier: chatty
name: Chatty
provider:
  type: scripted
  script:
    rounds:
      - delay: 700ms
        text: "Looking it up."
        tool_calls: [{name: lookup_order, arguments: {order_id: "${order_id}"}}]
      - delay: 700ms
        text: "Checking again."
        tool_calls: [{name: lookup_order, arguments: {order_id: "${order_id}"}}]
      - delay: 700ms
        text: "All is in order."
tools: [lookup_order]
`

// TestKilledServerFollowUpIsFinishedByAWorker: a follow-up's turn streamed
// from one serve process that is killed in the middle of it is finished by
// a worker process, once: its events are gapless, every one of turn 2
// says so, and turn 2 settles once with its own answer.
func TestKilledServerFollowUpIsFinishedByAWorker(t *testing.T) {
	r := newRig(t, chattyYAML)
	first, _ := r.Start(t, testrig.Launch{Configuration: "chatty"})
	if first.Status != runtime.StatusCompleted {
		t.Fatalf("turn 1 = %s", first.Status)
	}
	s := startServe(t, r.DSN, "--workers", "0", lease)
	api := newAPIClient(t, r, s, r.owner, "run:start", "run:read")
	other := r.Order(t)
	posted := time.Now()
	resp, err := api.do(http.MethodPost, fmt.Sprintf("/api/runs/%d/messages", first.RunID),
		map[string]string{"content": "and " + other + "?"}, "application/x-ndjson")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		t.Fatalf("follow-up = %d", resp.StatusCode)
	}
	st := testrig.Read(t, resp.Body, posted)
	// After turn 2's first lookup the run is in its second slow round.
	st.WaitFor(t, 15*time.Second, "turn 2's first tool step", func(l testrig.Line) bool {
		return l.Type() == "step" && strings.Contains(l.Raw, `"kind":"tool"`)
	})
	if got := r.Run(t, first.RunID); got.Status != runtime.StatusRunning || got.ConversationTurn != 2 {
		t.Fatalf("before the kill: %s at turn %d, want turn 2 running", got.Status, got.ConversationTurn)
	}
	kill9(t, s)

	wk := startWork(t, r, lease, "--workers", "1")
	done := r.WaitStatus(t, first.RunID, runtime.StatusCompleted, 40*time.Second)
	if done.Answer != "All is in order." || done.ConversationTurn != 2 {
		t.Errorf("after recovery: answer %q at turn %d, want turn 2's", done.Answer, done.ConversationTurn)
	}
	if n := r.Count(t, `SELECT COUNT(*) FROM run_messages WHERE run_id = ? AND turn = 2 AND body LIKE ?`, first.RunID, "%"+other+"%"); n < 3 {
		t.Errorf("%d messages of turn 2 name %s, want its message and both lookups", n, other)
	}
	evs := r.Gapless(t, first.RunID)
	settles := map[int]int{}
	for _, e := range evs {
		if e.Kind == runtime.KindSettle {
			settles[e.Turn]++
		}
	}
	if settles[1] != 1 || settles[2] != 1 {
		t.Errorf("settles by turn = %v, want one in each of turns 1 and 2", settles)
	}
	if last := evs[len(evs)-2]; last.Kind != runtime.KindTurnEnded || last.Turn != 2 {
		t.Errorf("the event before the last settle is %s of turn %d, want turn 2's turn_ended", last.Kind, last.Turn)
	}
	if _, code := terminate(t, wk, 15*time.Second); code != 0 {
		t.Errorf("turnstile work exit status = %d, want 0; stderr:\n%s", code, wk.stderr)
	}
}
