package runtime

import (
	"sync"
	"time"
)

// Text as it is written: what a provider streams during a round goes to
// the continuation's observer (the request's stream) and to the followers
// of the run in this process (the event stream), coalesced: the first
// piece at once, then whatever arrived in the next DeltaEvery together,
// the model's answer and its thinking as separate pieces in the order they
// came. Every piece of a round goes out before the round's step. Pieces
// are never stored as events; the answer so far is (partialWriter).

// DeltaEvery is how long at most a piece of text waits for the pieces
// after it before readers get them together.
const DeltaEvery = 75 * time.Millisecond

// deltaFlow is one round's stream of pieces to its readers.
type deltaFlow struct {
	c       *Continuation
	obs     DeltaObserver // nil when the observer wants no text
	partial *partialWriter

	mu      sync.Mutex // held while a batch goes out, so batches keep their order
	pending []Delta
	sent    time.Time
	timer   *time.Timer
	done    bool
}

func (c *Continuation) newDeltaFlow() *deltaFlow {
	d := &deltaFlow{c: c, partial: c.newPartialWriter()}
	d.obs, _ = c.obs.(DeltaObserver)
	return d
}

// add takes a piece from the provider.
func (d *deltaFlow) add(x Delta) {
	if x.Text == "" {
		return
	}
	x.Turn = d.c.Turn()
	d.partial.add(x)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.done {
		return
	}
	if n := len(d.pending); n > 0 && d.pending[n-1].Thinking == x.Thinking {
		d.pending[n-1].Text += x.Text
	} else {
		d.pending = append(d.pending, x)
	}
	if d.timer != nil {
		return // a batch is due
	}
	if wait := DeltaEvery - time.Since(d.sent); wait > 0 {
		d.timer = time.AfterFunc(wait, d.tick)
		return
	}
	d.flushLocked()
}

func (d *deltaFlow) tick() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer = nil
	if !d.done {
		d.flushLocked()
	}
}

func (d *deltaFlow) flushLocked() {
	if len(d.pending) == 0 {
		return
	}
	batch := d.pending
	d.pending, d.sent = nil, time.Now()
	if d.obs != nil {
		for _, x := range batch {
			d.obs.OnDelta(x)
		}
	}
	d.c.e.feed.publishDeltas(d.c, batch)
}

// end sends what waits, before the round's step is recorded. kept says
// the round ended without its step: the partial answer is what the run
// keeps of it.
func (d *deltaFlow) end(kept bool) {
	d.mu.Lock()
	d.done = true
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	d.flushLocked()
	d.mu.Unlock()
	d.partial.end(kept)
}

// answer is the answer (not the thinking) the round streamed so far.
func (d *deltaFlow) answer() string {
	text, _ := d.partial.answer()
	return text
}
