package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// errNotObject is DecodePayload's error for a payload that is not a JSON
// object (an empty one, say).
var errNotObject = errors.New("runtime: the payload is not a JSON object")

// Decode reads the event's stored payload into its kind's struct: an
// *LLMPayload for KindLLM, a *ToolPayload for KindTool, and so on (see
// DecodePayload). It fails for a kind that has no payload struct and for a
// payload that is not a JSON object.
func (e Event) Decode() (EventPayload, error) {
	p := newPayload(e.Kind)
	if p == nil {
		return nil, fmt.Errorf("runtime: event kind %q has no payload struct", e.Kind)
	}
	if err := DecodePayload(e.Payload, p); err != nil {
		return nil, err
	}
	return p, nil
}

// newPayload is a new payload of a kind's struct; nil for a kind that has
// none.
func newPayload(kind EventKind) EventPayload {
	switch kind {
	case KindLLM:
		return &LLMPayload{}
	case KindTool:
		return &ToolPayload{}
	case KindSuspend:
		return &SuspendPayload{}
	case KindApproval:
		return &ApprovalPayload{}
	case KindInput:
		return &InputPayload{}
	case KindCancel:
		return &CancelPayload{}
	case KindSettle:
		return &SettlePayload{}
	case KindUnavailable:
		return &UnavailablePayload{}
	case KindTurnStarted:
		return &TurnStartedPayload{}
	case KindTurnEnded:
		return &TurnEndedPayload{}
	}
	return nil
}

// DecodePayload reads a stored payload into p, a pointer to a payload
// struct, at whatever privacy level it was stored: a Content field gets
// the value stored under its key (at full or redacted), or else Withheld
// and the size stored under "<key>_bytes" (at metadata). Nested structs,
// pointers to them and lists of them are read the same way. A value that
// does not fit its field leaves the field zero, and a list's entry that
// is not an object is left out: a page shows the rest of a damaged row
// rather than nothing. It fails only when raw is not a JSON object.
func DecodePayload(raw json.RawMessage, p any) error {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.IsNil() || !walked(v.Type().Elem()) {
		return fmt.Errorf("runtime: DecodePayload into %T, want a pointer to a payload struct", p)
	}
	// A decoder, not json.Unmarshal: what follows the object is ignored,
	// as the pages that read payloads always did.
	var m map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(raw)).Decode(&m) != nil || m == nil {
		return errNotObject
	}
	decodeFields(m, v.Elem())
	return nil
}

// decodeFields fills the struct v from the keys of a stored object.
func decodeFields(m map[string]json.RawMessage, v reflect.Value) {
	pt := payloadTypeOf(v.Type())
	for i := range pt.fields {
		f := &pt.fields[i]
		fv := v.Field(f.index)
		if f.content {
			var c Content
			if raw, ok := m[f.name]; ok && !isNull(raw) {
				c.Value = decodeAny(raw)
			} else if raw, ok := m[f.name+"_bytes"]; ok && json.Unmarshal(raw, &c.Size) == nil {
				c.Withheld = true
			}
			fv.Set(reflect.ValueOf(c))
			continue
		}
		if raw, ok := m[f.name]; ok && !isNull(raw) {
			decodeField(raw, fv)
		}
	}
}

// decodeField sets fv from a stored value, leaving it zero when the value
// does not fit.
func decodeField(raw json.RawMessage, fv reflect.Value) {
	t := fv.Type()
	switch {
	case walked(t):
		if m, ok := object(raw); ok {
			decodeFields(m, fv)
		}
	case t.Kind() == reflect.Pointer && walked(t.Elem()):
		if m, ok := object(raw); ok {
			nv := reflect.New(t.Elem())
			decodeFields(m, nv.Elem())
			fv.Set(nv)
		}
	case t.Kind() == reflect.Slice && walked(t.Elem()):
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil {
			return
		}
		s := reflect.MakeSlice(t, 0, len(list))
		for _, e := range list {
			if m, ok := object(e); ok {
				ev := reflect.New(t.Elem()).Elem()
				decodeFields(m, ev)
				s = reflect.Append(s, ev)
			}
		}
		fv.Set(s)
	default:
		nv := reflect.New(t)
		if json.Unmarshal(raw, nv.Interface()) == nil {
			fv.Set(nv.Elem())
		}
	}
}

// object decodes a stored value that is a JSON object.
func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

// decodeAny decodes a stored content value, numbers kept as written.
func decodeAny(raw json.RawMessage) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}
