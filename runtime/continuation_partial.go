package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"
)

// The answer a round is streaming is written while it streams, so that a
// reload of the run's page, GET /api/runs/:id/messages or another process
// shows the text so far: at most every PartialEvery, and at the round's
// boundaries — when the model turns from thinking to answering, and when
// the round ends without its step (the provider failed, or the run was
// cancelled): that text is what the run keeps of the round. A round that
// ends with its step writes nothing more: the step's own message takes
// the partial's index, which makes the partial stale (see StoredPartial).

// PartialEvery is how often at most a streaming round's answer so far is
// written; the first write comes PartialEvery after the round's first
// piece, so a round that answers at once costs no write at all.
const PartialEvery = 1500 * time.Millisecond

// partialWriteTimeout bounds one write, which runs on a timer, not on the
// continuation's context.
const partialWriteTimeout = 10 * time.Second

// PartialStore is what writing and reading a streaming answer needs of the
// store.
type PartialStore interface {
	// SavePartial writes a run's partial answer over the one before,
	// while claimedBy holds the run; ErrLeaseLost (nothing written) when
	// it does not.
	SavePartial(ctx context.Context, p StoredPartial, claimedBy string) error
	// Partial returns the last partial answer written for a run, or
	// ErrNotFound.
	Partial(ctx context.Context, runID int64) (StoredPartial, error)
}

// StoredPartial is the answer a run's round streamed so far: an assistant
// Message as JSON, sealed at PartialPlace. Idx is the transcript index the
// round's message takes once the round is recorded: a partial is current
// only while the transcript holds no message at Idx.
type StoredPartial struct {
	RunID     int64     `db:"run_id"`
	Idx       int       `db:"idx"`
	Turn      int       `db:"turn"`
	Body      []byte    `db:"body"`
	UpdatedAt time.Time `db:"updated_at"`
}

// partialWriter keeps one round's text and thinking and writes them.
type partialWriter struct {
	c         *Continuation
	idx, turn int

	write sync.Mutex // held by a write, so that end waits for one in flight

	mu       sync.Mutex
	text     strings.Builder
	thinking strings.Builder
	dirty    bool // pieces arrived since the last write
	thought  bool // the last piece was thinking
	first    time.Time
	written  time.Time
	timer    *time.Timer
	done     bool
}

func (c *Continuation) newPartialWriter() *partialWriter {
	return &partialWriter{c: c, idx: len(c.state.Messages), turn: c.Turn()}
}

// add keeps a piece and schedules a write.
func (p *partialWriter) add(d Delta) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	now := time.Now()
	if p.first.IsZero() {
		p.first = now
	}
	boundary := p.thought && !d.Thinking && p.text.Len() == 0
	if d.Thinking {
		p.thinking.WriteString(d.Text)
	} else {
		p.text.WriteString(d.Text)
	}
	p.thought, p.dirty = d.Thinking, true
	if p.timer != nil && !boundary {
		return
	}
	due := p.first.Add(PartialEvery)
	if !p.written.IsZero() {
		due = p.written.Add(PartialEvery)
	}
	wait := time.Until(due)
	if boundary {
		wait = 0
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.timer = time.AfterFunc(max(wait, 0), p.tick)
}

func (p *partialWriter) tick() {
	p.write.Lock()
	defer p.write.Unlock()
	p.mu.Lock()
	p.timer = nil
	if p.done || !p.dirty {
		p.mu.Unlock()
		return
	}
	m := p.messageLocked()
	p.mu.Unlock()
	p.save(m)
}

// messageLocked is the answer so far, and marks it written.
func (p *partialWriter) messageLocked() Message {
	p.dirty, p.written = false, time.Now()
	return Message{Role: "assistant", Content: p.text.String(), Thinking: p.thinking.String()}
}

// end stops the writes. A round that ended without its step (kept) has
// what it streamed written once more, if anything is new: the run keeps
// it. It waits for a write in flight, so none lands after it.
func (p *partialWriter) end(kept bool) {
	p.mu.Lock()
	p.done = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.mu.Unlock()
	p.write.Lock()
	defer p.write.Unlock()
	p.mu.Lock()
	var m Message
	save := kept && p.dirty
	if save {
		m = p.messageLocked()
	}
	p.mu.Unlock()
	if save {
		p.save(m)
	}
}

// answer is the text the round streamed so far, and its thinking.
func (p *partialWriter) answer() (text, thinking string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.text.String(), p.thinking.String()
}

// save writes the answer so far. A failure is logged, not a step's: the
// partial is for readers, and the round's step records the answer whole.
func (p *partialWriter) save(m Message) {
	c := p.c
	b, err := json.Marshal(m)
	if err == nil {
		b, err = c.e.sealer.Seal(b, PartialPlace(c.run.ID))
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), partialWriteTimeout)
		err = c.e.store.SavePartial(ctx, StoredPartial{RunID: c.run.ID, Idx: p.idx, Turn: p.turn, Body: b}, c.run.ClaimedBy)
		cancel()
	}
	switch {
	case errors.Is(err, ErrLeaseLost):
		c.e.log.Info("partial answer not written: the run is no longer held", "run", c.run.ID)
	case err != nil:
		c.e.log.Warn("partial answer not written", "run", c.run.ID, "err", err)
	}
}
