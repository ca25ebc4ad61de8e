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

// TestEditedArgumentsAreSealed: with state keys set, an approval's edited
// arguments are sealed wherever they are stored (the decision's row, the
// rewritten transcript message, the approval event at privacy level full),
// and a worker that holds the key opens them and refunds the edited amount.
func TestEditedArgumentsAreSealed(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.Configure(t, contentYAML...)
	eng := w.engine(t, entry("A", keyA))
	paused, order := w.Start(t, testrig.Launch{Configuration: "full-refund", Engine: eng})
	if paused.Status != runtime.StatusWaitingForApproval {
		t.Fatalf("run is %s (%v), want it waiting", paused.Status, paused.Err)
	}
	edit := fmt.Sprintf(`{"order_id":%q,"amount_cents":321,"reason":"EDIT-MARKER"}`, order)
	c, err := eng.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: w.approver, Path: runtime.PathDurable,
		Arguments: map[string]json.RawMessage{paused.Pending.Calls[0].ID: json.RawMessage(edit)}})
	if c != nil || err != nil {
		t.Fatalf("durable edit = %v, %v; want it recorded for a worker", c, err)
	}
	var stored []byte
	if err := w.DB.Get(&stored, `SELECT arguments FROM decisions WHERE run_id = ?`, paused.RunID); err != nil {
		t.Fatal(err)
	}
	if id, ok := sealedID(stored); !ok || id != "A" {
		t.Errorf("decisions.arguments starts %q, want it sealed under A", stored[:min(len(stored), 16)])
	}
	stop := testrig.Work(t, eng, 1, 10*time.Millisecond)
	w.WaitStatus(t, paused.RunID, runtime.StatusCompleted, 10*time.Second)
	stop()
	if n := w.Count(t, `SELECT COUNT(*) FROM demo_refunds WHERE order_id = ? AND amount_cents = 321`, order); n != 1 {
		t.Errorf("refunds of 321 cents = %d, want the worker to have opened the edit and refunded it", n)
	}
	for _, leak := range w.plainText(t, []string{"EDIT-MARKER", "ARGUMENT-MARKER"}) {
		t.Error(leak)
	}
	k := keyring(t, entry("A", keyA))
	var bodies [][]byte
	if err := w.DB.Select(&bodies, `SELECT body FROM run_messages WHERE run_id = ? ORDER BY idx`, paused.RunID); err != nil {
		t.Fatal(err)
	}
	var transcript bytes.Buffer
	for i, b := range bodies {
		plain, err := k.Open(b, runtime.MessagePlace(paused.RunID, i))
		if err != nil {
			t.Fatal(err)
		}
		transcript.Write(plain)
	}
	if !strings.Contains(transcript.String(), "EDIT-MARKER") || strings.Contains(transcript.String(), "ARGUMENT-MARKER") {
		t.Errorf("the opened transcript does not show the call as edited:\n%s", transcript.String())
	}
}
