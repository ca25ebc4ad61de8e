package runtime

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestEveryKindHasItsPayload: Decode reads each kind into the struct
// whose Kind it is, and the kinds conversations will record start typed.
func TestEveryKindHasItsPayload(t *testing.T) {
	for _, kind := range []EventKind{KindLLM, KindTool, KindSuspend, KindApproval, KindInput, KindCancel, KindSettle,
		KindUnavailable, KindTurnStarted, KindTurnEnded} {
		p, err := Event{Kind: kind, Payload: json.RawMessage(`{}`)}.Decode()
		if err != nil || p.Kind() != kind {
			t.Errorf("Decode of %s = %T, %v; want its payload", kind, p, err)
		}
	}
	if _, err := (Event{Kind: "observer", Payload: json.RawMessage(`{}`)}).Decode(); err == nil {
		t.Error("Decode of a kind without a payload struct did not fail")
	}
	for _, raw := range []string{``, `null`, `not json`, `[1]`, `"text"`} {
		if _, err := (Event{Kind: KindLLM, Payload: json.RawMessage(raw)}).Decode(); err == nil {
			t.Errorf("Decode of %q did not fail", raw)
		}
	}
}

// TestDecodeAtEveryLevel: what the filter stored reads back as the
// level kept it: the value, its redacted shape, or its size.
func TestDecodeAtEveryLevel(t *testing.T) {
	_, round := benchRound()
	args := map[string]any{"order_id": "ORD-18"}
	for _, tc := range []struct {
		level    PrivacyLevel
		text     Content
		argument Content
	}{
		{PrivacyFull, Content{Value: round.Text.Value}, Content{Value: args}},
		{PrivacyRedacted, Content{Value: "[redacted]"}, Content{Value: map[string]any{"order_id": "[redacted]"}}},
		{PrivacyMetadata, Content{Withheld: true, Size: len(round.Text.Value.(string))}, Content{Withheld: true, Size: 21}},
	} {
		var got LLMPayload
		if err := DecodePayload(filter(tc.level, round), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Text, tc.text) || len(got.ToolCalls) != 2 || !reflect.DeepEqual(got.ToolCalls[1].Arguments, tc.argument) {
			t.Errorf("%s: text %#v, calls %#v; want text %#v, second arguments %#v", tc.level, got.Text, got.ToolCalls, tc.text, tc.argument)
		}
		if got.ToolCalls[0].ID != "call_3" || got.ToolCalls[1].Name != "lookup_order" || got.Usage != round.Usage {
			t.Errorf("%s: metadata read back as %+v", tc.level, got)
		}
	}
}

// TestDecodeIdleSettle: the settle of an idle run's cancel has no
// answer, iterations or usage, and reads as having none.
func TestDecodeIdleSettle(t *testing.T) {
	evs := cancelEvents(Actor{Name: "olga"}, StatusWaitingForApproval, 1, 0)
	c, err := evs[0].Decode()
	if err != nil || c.(*CancelPayload).By == nil || *c.(*CancelPayload).By != "olga" || c.(*CancelPayload).From != StatusWaitingForApproval {
		t.Errorf("cancel = %+v, %v; want by olga from waiting_for_approval", c, err)
	}
	if evs[1].Kind != KindTurnEnded {
		t.Errorf("event 2 is %s, want the turn_ended before the settle", evs[1].Kind)
	}
	s, err := evs[2].Decode()
	if err != nil {
		t.Fatal(err)
	}
	if want := (&SettlePayload{Status: StatusCancelled, Reason: ReasonCancelled}); !reflect.DeepEqual(s, want) {
		t.Errorf("settle = %+v, want %+v", s, want)
	}
}

// TestDecodeDamaged: a value that does not fit its field leaves it zero
// and the rest is read; a list's entry that is no object is left out.
func TestDecodeDamaged(t *testing.T) {
	var got SuspendPayload
	raw := `{"kind": "approval", "calls": [7, {"id": "call_1", "name": 3, "arguments_bytes": "x"}], "digest": 12, "note": "n"} trailing`
	if err := DecodePayload(json.RawMessage(raw), &got); err != nil {
		t.Fatal(err)
	}
	want := SuspendPayload{TurnKind: "approval", Calls: []CallPayload{{ID: "call_1"}}, Note: "n"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if err := DecodePayload(json.RawMessage(`{}`), got); err == nil {
		t.Error("DecodePayload into a struct, not a pointer, did not fail")
	}
}

// TestContentOnlyThroughTheFilter: encoding/json refuses a payload's
// content, so that none is ever stored around the privacy filter.
func TestContentOnlyThroughTheFilter(t *testing.T) {
	if b, err := json.Marshal(ToolPayload{Result: Content{Value: marker}}); err == nil {
		t.Errorf("json.Marshal of a payload = %s, want an error", b)
	}
	var p ToolPayload
	if err := json.Unmarshal([]byte(`{"result": "x"}`), &p); err == nil {
		t.Error("json.Unmarshal into a payload did not fail")
	}
}

// TestTurnPayloads: the payloads of the events conversations will record,
// as they will be stored.
func TestTurnPayloads(t *testing.T) {
	started := TurnStartedPayload{Turn: 2, Content: Content{Value: "And the other order? " + marker}}
	for level, want := range map[PrivacyLevel]string{
		PrivacyFull:     `{"content":"And the other order? ` + marker + `","turn":2}`,
		PrivacyRedacted: `{"content":"[redacted]","turn":2}`,
		PrivacyMetadata: `{"content_bytes":32,"turn":2}`,
	} {
		if got := string(filter(level, started)); got != want {
			t.Errorf("turn_started at %s = %s, want %s", level, got, want)
		}
	}
	ended := TurnEndedPayload{Turn: 2, Status: StatusCompleted, Reason: ReasonCompleted}
	if got, want := string(filter(PrivacyMetadata, ended)), `{"reason":"completed","status":"completed","turn":2}`; got != want {
		t.Errorf("turn_ended = %s, want %s", got, want)
	}
}
