package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
)

// Run content at rest. With state keys set, every stored copy of what a
// run says or is told is sealed, not only its state and transcript: the
// prompt and the answer on its row, the reason and the input of each
// decision, and the payload of each event. What queries need (ids,
// statuses, times, tool names, digests) stays plain. Rows written before
// keys were set read as they are: JSON blobs start with '{' and a sealed
// blob never does, and text that does not start with the sealed prefix
// is plain.

// unreadableText stands in for content sealed under a key this process
// does not hold, or that does not open; the rest of the page still shows.
const unreadableText = "[sealed under a key this server does not hold]"

// unreadablePayload is unreadableText for an event's payload.
var unreadablePayload = json.RawMessage(`{"unreadable":"sealed under a key this server does not hold"}`)

// sealText seals a piece of run content that is text.
func (e *Engine) sealText(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := e.sealer.Seal([]byte(s))
	return string(b), err
}

// openText opens what sealText stored, or returns text stored plain as it
// is.
func (e *Engine) openText(s string) (string, error) {
	if !isSealed([]byte(s)) {
		return s, nil
	}
	b, err := e.sealer.Open([]byte(s))
	if err != nil {
		return "", fmt.Errorf("runtime: open content: %w", err)
	}
	return string(b), nil
}

// sealJSON seals run content that is a JSON value: an event's payload, a
// decision's input. Empty stays empty.
func (e *Engine) sealJSON(doc json.RawMessage) (json.RawMessage, error) {
	if len(doc) == 0 {
		return doc, nil
	}
	return e.sealer.Seal(doc)
}

// openJSON opens what sealJSON stored, or returns JSON stored plain as it
// is.
func (e *Engine) openJSON(doc json.RawMessage) (json.RawMessage, error) {
	if !isSealed(doc) {
		return doc, nil
	}
	b, err := e.sealer.Open(doc)
	if err != nil {
		return nil, fmt.Errorf("runtime: open content: %w", err)
	}
	return b, nil
}

func isSealed(b []byte) bool { return bytes.HasPrefix(b, []byte(sealedPrefix)) }

// readable opens a run's prompt and answer for a viewer; content that
// cannot be opened here reads as unreadableText.
func (e *Engine) readable(run *Run) *Run {
	r := *run
	var err error
	if r.Prompt, err = e.openText(run.Prompt); err != nil {
		r.Prompt = unreadableText
	}
	if r.Answer, err = e.openText(run.Answer); err != nil {
		r.Answer = unreadableText
	}
	return &r
}

// Events returns a run's stored events after a seq, in order, with their
// payloads opened; a payload that cannot be opened here reads as such.
// It checks no permission: callers show events only to who may read the
// run (see Visible).
func (e *Engine) Events(ctx context.Context, runID int64, afterSeq int) ([]Event, error) {
	evs, err := e.store.Events(ctx, runID, afterSeq)
	if err != nil {
		return nil, err
	}
	for i := range evs {
		if evs[i].Payload, err = e.openJSON(evs[i].Payload); err != nil {
			evs[i].Payload = unreadablePayload
		}
	}
	return evs, nil
}

// LastSeq returns the highest event seq of a run, 0 when it has none.
func (e *Engine) LastSeq(ctx context.Context, runID int64) (int, error) {
	return e.store.LastSeq(ctx, runID)
}

// sealEvents returns events as they are stored: their payloads sealed.
func (e *Engine) sealEvents(evs []Event) ([]Event, error) {
	out := make([]Event, len(evs))
	for i, ev := range evs {
		var err error
		if ev.Payload, err = e.sealJSON(ev.Payload); err != nil {
			return nil, err
		}
		out[i] = ev
	}
	return out, nil
}

// openDecision opens the content of a decision a worker is about to apply.
// A decision sealed under a key this process lacks fails with
// ErrKeyMissing, as its run's state would.
func (e *Engine) openDecision(d *DecisionRecord) error {
	var err error
	if d.Reason, err = e.openText(d.Reason); err != nil {
		return err
	}
	if d.Input, err = e.openJSON(d.Input); err != nil {
		return err
	}
	if d.Arguments, err = e.openJSON(d.Arguments); err != nil {
		return err
	}
	return nil
}

// sealDecision returns the decision as it is stored: its reason, input
// and edited arguments sealed.
func (e *Engine) sealDecision(d DecisionRecord) (DecisionRecord, error) {
	var err error
	if d.Reason, err = e.sealText(d.Reason); err != nil {
		return d, err
	}
	if d.Input, err = e.sealJSON(d.Input); err != nil {
		return d, err
	}
	if d.Arguments, err = e.sealJSON(d.Arguments); err != nil {
		return d, err
	}
	return d, nil
}
