package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Run content at rest. With state keys set, every stored copy of what a
// run says or is told is sealed, not only its state and transcript: the
// prompt and the answer on its row, the reason and the input of each
// decision, and the payload of each event. What queries need (ids,
// statuses, times, tool names, digests) stays plain. Each copy is sealed
// for its place and opens nowhere else; plain content where sealed content
// is required does not open either (see Sealer). Empty stays empty: there
// is nothing to seal in it.

// whyUnreadable says why content failed to open with err, for the
// stand-in a page or the API shows instead; the rest of the page still
// shows.
func whyUnreadable(err error) string {
	switch {
	case errors.Is(err, ErrKeyMissing):
		return "sealed under a key this server does not hold"
	case errors.Is(err, ErrNotSealed):
		return "stored unsealed; this server reads sealed content only"
	default:
		return "sealed content that does not open here"
	}
}

// unreadable is the stand-in for text that failed to open with err.
func unreadable(err error) string { return "[" + whyUnreadable(err) + "]" }

// unreadablePayload is the stand-in for an event's payload that failed to
// open with err: still a JSON object.
func unreadablePayload(err error) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"unreadable": whyUnreadable(err)})
	return b
}

// sealText seals a piece of run content that is text.
func (e *Engine) sealText(s string, at Place) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := e.sealer.Seal([]byte(s), at)
	return string(b), err
}

// openText opens what sealText stored.
func (e *Engine) openText(s string, at Place) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := e.sealer.Open([]byte(s), at)
	if err != nil {
		return "", fmt.Errorf("runtime: open content: %w", err)
	}
	return string(b), nil
}

// sealJSON seals run content that is a JSON value: an event's payload, a
// decision's input.
func (e *Engine) sealJSON(doc json.RawMessage, at Place) (json.RawMessage, error) {
	if len(doc) == 0 {
		return doc, nil
	}
	return e.sealer.Seal(doc, at)
}

// openJSON opens what sealJSON stored.
func (e *Engine) openJSON(doc json.RawMessage, at Place) (json.RawMessage, error) {
	if len(doc) == 0 {
		return doc, nil
	}
	b, err := e.sealer.Open(doc, at)
	if err != nil {
		return nil, fmt.Errorf("runtime: open content: %w", err)
	}
	return b, nil
}

// readable opens a run's prompt and answer for a viewer; content that
// cannot be opened here reads as what unreadable says.
func (e *Engine) readable(run *Run) *Run {
	r := *run
	var err error
	if r.Prompt, err = e.openText(run.Prompt, RunPlace("prompt", run.ID)); err != nil {
		r.Prompt = unreadable(err)
	}
	if r.Answer, err = e.openText(run.Answer, RunPlace("answer", run.ID)); err != nil {
		r.Answer = unreadable(err)
	}
	if r.Title, err = e.openText(run.Title, RunPlace("title", run.ID)); err != nil {
		r.Title = unreadable(err)
	} else if r.Title == "" && r.Prompt != "" {
		r.Title = CutTitle(r.Prompt) // a run of before titles
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
		if evs[i].Payload, err = e.openJSON(evs[i].Payload, EventPlace(runID, evs[i].Seq)); err != nil {
			evs[i].Payload = unreadablePayload(err)
		}
	}
	return evs, nil
}

// LastSeq returns the highest event seq of a run, 0 when it has none.
func (e *Engine) LastSeq(ctx context.Context, runID int64) (int, error) {
	return e.store.LastSeq(ctx, runID)
}

// sealEvents returns a run's events as they are stored: their payloads
// sealed for their seqs, in the run's current turn.
func (e *Engine) sealEvents(run *Run, evs []Event) ([]Event, error) {
	out := make([]Event, len(evs))
	for i, ev := range evs {
		var err error
		ev.Turn = run.ConversationTurn
		if ev.Payload, err = e.sealJSON(ev.Payload, EventPlace(run.ID, ev.Seq)); err != nil {
			return nil, err
		}
		out[i] = ev
	}
	return out, nil
}

// openDecision opens the content of a decision a worker is about to apply.
// A decision sealed under a key this process lacks fails with
// ErrKeyMissing, as its run's state would; one sealed for another run's
// decision fails as corrupt.
func (e *Engine) openDecision(d *DecisionRecord) error {
	var err error
	if d.Reason, err = e.openText(d.Reason, DecisionPlace("reason", d.RunID, d.TurnDigest)); err != nil {
		return err
	}
	if d.Input, err = e.openJSON(d.Input, DecisionPlace("input", d.RunID, d.TurnDigest)); err != nil {
		return err
	}
	if d.Arguments, err = e.openJSON(d.Arguments, DecisionPlace("arguments", d.RunID, d.TurnDigest)); err != nil {
		return err
	}
	if d.Calls, err = e.openJSON(d.Calls, DecisionPlace("calls", d.RunID, d.TurnDigest)); err != nil {
		return err
	}
	return nil
}

// sealDecision returns the decision as it is stored: its reason, input,
// edited arguments and per-call choices sealed.
func (e *Engine) sealDecision(d DecisionRecord) (DecisionRecord, error) {
	var err error
	if d.Reason, err = e.sealText(d.Reason, DecisionPlace("reason", d.RunID, d.TurnDigest)); err != nil {
		return d, err
	}
	if d.Input, err = e.sealJSON(d.Input, DecisionPlace("input", d.RunID, d.TurnDigest)); err != nil {
		return d, err
	}
	if d.Arguments, err = e.sealJSON(d.Arguments, DecisionPlace("arguments", d.RunID, d.TurnDigest)); err != nil {
		return d, err
	}
	// The per-call reasons are content like reason.
	if d.Calls, err = e.sealJSON(d.Calls, DecisionPlace("calls", d.RunID, d.TurnDigest)); err != nil {
		return d, err
	}
	return d, nil
}
