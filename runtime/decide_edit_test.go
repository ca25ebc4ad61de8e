package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// edit is the replacement arguments of the one call a run paused on.
func edit(paused runtime.Outcome, args string) map[string]json.RawMessage {
	return map[string]json.RawMessage{paused.Pending.Calls[0].ID: json.RawMessage(args)}
}

// transcript reads a run's stored transcript.
func transcript(t *testing.T, f *fixture, id int64) []runtime.Message {
	t.Helper()
	res, err := f.Store.Resume(context.Background(), id, true)
	if err != nil {
		t.Fatal(err)
	}
	msgs := make([]runtime.Message, len(res.Messages))
	for i, b := range res.Messages {
		if err := json.Unmarshal(b, &msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return msgs
}

// refundsOf counts the refunds of an order of exactly this amount.
func refundsOf(t *testing.T, f *fixture, order string, cents int) int {
	t.Helper()
	return f.Count(t, `SELECT COUNT(*) FROM demo_refunds WHERE order_id = ? AND amount_cents = ?`, order, cents)
}

// TestEditedArgumentsAreWhatRuns: an approval that edits the refund's
// amount pays out the edited amount, once; the transcript's call reads as
// executed, so the model knows; the approval event names the edited call
// and, at privacy level metadata, not the values.
func TestEditedArgumentsAreWhatRuns(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, order := f.Waiting(t, "refund")
	callID := paused.Pending.Calls[0].ID
	args := fmt.Sprintf(`{"order_id":%q,"amount_cents":1234,"reason":"EDITED-REASON"}`, order)
	out := f.Decide(t, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Arguments: edit(paused, args)})
	if out.Status != runtime.StatusCompleted {
		t.Fatalf("outcome = %+v, want completed", out)
	}
	if got, all := refundsOf(t, f, order, 1234), f.Refunds(t, order); got != 1 || all != 1 {
		t.Errorf("refunds of 1234 cents = %d of %d in all, want the one refund with the edited amount", got, all)
	}

	var call *runtime.ToolCall
	msgs := transcript(t, f, paused.RunID)
	for i, m := range msgs {
		for j, tc := range m.ToolCalls {
			if tc.ID == callID {
				call = &msgs[i].ToolCalls[j]
			}
		}
	}
	if call == nil {
		t.Fatalf("no message of the transcript makes call %s: %+v", callID, msgs)
	}
	var got map[string]any
	if err := json.Unmarshal(call.Arguments, &got); err != nil {
		t.Fatal(err)
	}
	if got["amount_cents"] != 1234.0 || got["reason"] != "EDITED-REASON" {
		t.Errorf("the transcript's call has arguments %s, want the edited ones %s", call.Arguments, args)
	}
	if n := f.Count(t, `SELECT COUNT(*) FROM run_messages WHERE run_id = ?`, paused.RunID); n != len(msgs) {
		t.Errorf("%d stored messages, %d read: the rewrite left a gap or a duplicate", n, len(msgs))
	}

	var approval *runtime.Event
	for _, e := range f.Gapless(t, paused.RunID) {
		if e.Kind == runtime.KindApproval {
			approval = &e
		}
	}
	if approval == nil {
		t.Fatal("no approval event")
	}
	var p map[string]any
	if err := json.Unmarshal(approval.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if ids, _ := p["edited"].([]any); len(ids) != 1 || ids[0] != callID {
		t.Errorf("approval event says edited = %v, want [%s]; payload %s", p["edited"], callID, approval.Payload)
	}
	if s := string(approval.Payload); strings.Contains(s, "1234") || strings.Contains(s, "EDITED-REASON") {
		t.Errorf("the approval event at privacy level metadata holds the edited values: %s", s)
	}

	var stored []byte
	if err := f.DB.Get(&stored, `SELECT arguments FROM decisions WHERE run_id = ?`, paused.RunID); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stored), callID) || !strings.Contains(string(stored), `"amount_cents":1234`) {
		t.Errorf("decision row's arguments = %s, want the edit by call id", stored)
	}
	if d := f.Decisions(t, paused.RunID); len(d) != 1 || d[0].Digest != paused.Digest {
		t.Errorf("decisions = %+v, want one, of the turn as offered (%s)", d, paused.Digest)
	}
}

// TestEditedArgumentsOnTheDurablePath: a worker carries out an edited
// approval it reads from the decision's row.
func TestEditedArgumentsOnTheDurablePath(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, order := f.Waiting(t, "refund")
	c, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.approver, Path: runtime.PathDurable,
		Arguments: edit(paused, fmt.Sprintf(`{"order_id":%q,"amount_cents":77}`, order))})
	if err != nil || c != nil {
		t.Fatalf("durable decide = %v, %v; want it recorded", c, err)
	}
	work(t, f.engine(0), 1)
	f.WaitStatus(t, paused.RunID, runtime.StatusCompleted, 10*time.Second)
	if got, all := refundsOf(t, f, order, 77), f.Refunds(t, order); got != 1 || all != 1 {
		t.Errorf("refunds of 77 cents = %d of %d, want the one refund with the edited amount", got, all)
	}
}

// TestBadEditsWriteNothing: every edit the pipeline refuses leaves the run,
// its decisions and the refunds as they were, and says which field.
func TestBadEditsWriteNothing(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, order := f.Waiting(t, "refund")
	id := paused.Pending.Calls[0].ID
	for _, tc := range []struct {
		name     string
		decision string
		args     map[string]json.RawMessage
		form     map[string][]string // an edit form as a page posts it
		code     runtime.Code
		field    string // a key the refusal's Fields must hold
		message  string // a phrase its message must hold
	}{
		{name: "not an object", args: edit(paused, `[1, 2]`), code: runtime.CodeInvalidInput,
			field: "arguments." + id, message: "must be a JSON object"},
		{name: "a string", args: edit(paused, `"refund it all"`), code: runtime.CodeInvalidInput,
			field: "arguments." + id},
		{name: "invalid JSON text", args: edit(paused, `{"order_id": `), code: runtime.CodeInvalidInput,
			field: "arguments." + id, message: "not valid JSON"},
		{name: "a key given twice", args: edit(paused, fmt.Sprintf(`{"order_id":%q,"amount_cents":1,"amount_cents":9999}`, order)),
			code: runtime.CodeInvalidInput, field: "arguments." + id + ".amount_cents"},
		{name: "unknown call id", args: map[string]json.RawMessage{"call-nope": json.RawMessage(`{}`)},
			code: runtime.CodeInvalidInput, field: "arguments.call-nope", message: `no call "call-nope"`},
		{name: "schema: wrong type", args: edit(paused, fmt.Sprintf(`{"order_id":%q,"amount_cents":"ten"}`, order)),
			code: runtime.CodeInvalidInput, field: "arguments." + id + ".amount_cents", message: "must be an integer"},
		{name: "schema: below the minimum", args: edit(paused, fmt.Sprintf(`{"order_id":%q,"amount_cents":0}`, order)),
			code: runtime.CodeInvalidInput, field: "arguments." + id + ".amount_cents", message: "at least 1"},
		{name: "schema: required field missing", args: edit(paused, `{"amount_cents":5}`),
			code: runtime.CodeInvalidInput, field: "arguments." + id + ".order_id", message: "is required"},
		{name: "schema: unknown property", args: edit(paused, fmt.Sprintf(`{"order_id":%q,"to_account":"X"}`, order)),
			code: runtime.CodeInvalidInput, field: "arguments." + id + ".to_account", message: "is not allowed"},
		{name: "a form field that does not parse",
			form: map[string][]string{"edit": {id}, "arguments." + id + ".order_id": {order}, "arguments." + id + ".amount_cents": {"ten"}},
			code: runtime.CodeInvalidInput, field: "arguments." + id + ".amount_cents", message: "must be a whole number"},
		{name: "arguments with a denial", decision: runtime.DecisionDeny, args: edit(paused, fmt.Sprintf(`{"order_id":%q}`, order)),
			code: runtime.CodeInvalidRequest, message: "only with an approval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.State(t, paused.RunID)
			decision := tc.decision
			if decision == "" {
				decision = runtime.DecisionApprove
			}
			c, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
				Decision: decision, Actor: f.approver, Arguments: tc.args, Form: tc.form})
			if c != nil {
				c.Run(context.Background(), nil)
				t.Fatal("the edit was claimed")
			}
			var ref *runtime.Refusal
			if !asRefusal(err, &ref) || ref.Code != tc.code {
				t.Fatalf("err = %v, want a %s refusal", err, tc.code)
			}
			if _, ok := ref.Fields[tc.field]; tc.field != "" && !ok {
				t.Errorf("refusal fields = %v, want one for %s", ref.Fields, tc.field)
			}
			if !strings.Contains(ref.Message, tc.message) {
				t.Errorf("refusal message %q does not say %q", ref.Message, tc.message)
			}
			f.Unchanged(t, paused.RunID, before)
		})
	}
	// The run still takes a good edit afterwards.
	out := f.Decide(t, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Arguments: edit(paused, fmt.Sprintf(`{"order_id":%q,"amount_cents":5}`, order))})
	if out.Status != runtime.StatusCompleted || refundsOf(t, f, order, 5) != 1 {
		t.Errorf("after the refusals a good edit gave %s and %d refunds of 5 cents", out.Status, refundsOf(t, f, order, 5))
	}
}

// TestAnEditIsAnApprovalUnderFourEyes: the run's owner may not approve it
// by editing it either.
func TestAnEditIsAnApprovalUnderFourEyes(t *testing.T) {
	f := newFixture(t, 0, fourEyesYAML)
	paused, order := f.Waiting(t, "four-eyes")
	before := f.State(t, paused.RunID)
	_, err := f.Engine.Decide(context.Background(), runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionApprove, Actor: f.owner,
		Arguments: edit(paused, fmt.Sprintf(`{"order_id":%q,"amount_cents":1}`, order))})
	if code := runtime.CodeOf(err); code != runtime.CodeFourEyes {
		t.Fatalf("the owner's edit: %v, want four_eyes", err)
	}
	f.Unchanged(t, paused.RunID, before)
}

// TestAnEditThatChangesNothingIsNoEdit: a form sent back as it was
// prefilled approves the call as offered, and the event names no edit.
func TestAnEditThatChangesNothingIsNoEdit(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	paused, _ := f.Waiting(t, "refund")
	same := string(paused.Pending.Calls[0].Arguments)
	out := f.Decide(t, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest, Arguments: edit(paused, same)})
	if out.Status != runtime.StatusCompleted {
		t.Fatalf("outcome = %+v", out)
	}
	for _, e := range f.Events(t, paused.RunID) {
		if e.Kind == runtime.KindApproval && strings.Contains(string(e.Payload), "edited") {
			t.Errorf("approval event %s names an edit that changed nothing", e.Payload)
		}
	}
}

func asRefusal(err error, ref **runtime.Refusal) bool {
	r, ok := err.(*runtime.Refusal)
	*ref = r
	return ok
}
