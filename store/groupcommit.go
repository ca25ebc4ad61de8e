package store

import "sync"

// groupCommit makes the writes that arrive while others are being made in
// one batch: a group commit. An idle server makes each on its own, in one
// round trip; under load the writes that queued up behind a batch go
// together in the next, in one transaction of a few round trips instead of
// a transaction each, every one still guarded on its own and answered on
// its own. One batch is in flight at a time; a batch holds at most one
// write per run (writes on one run go in later batches, where their
// guards see what the earlier ones did) and at most limit.
//
// Claims (Claim) and votes (Vote) each have one.
type groupCommit[T any] struct {
	mu       sync.Mutex
	waiting  []queued[T]
	draining bool
}

type queued[T any] struct {
	run  int64
	w    T
	done chan error
}

// make queues w, a write on run, and waits for its batch, which do makes:
// one error per write, in order. The batch runs on a context of do's own:
// a write the database makes is made whether or not the client that asked
// still waits, as for a single one.
func (q *groupCommit[T]) make(run int64, w T, limit int, do func(batch []T) []error) error {
	done := make(chan error, 1)
	q.mu.Lock()
	q.waiting = append(q.waiting, queued[T]{run: run, w: w, done: done})
	if !q.draining {
		q.draining = true
		go q.drain(limit, do)
	}
	q.mu.Unlock()
	return <-done
}

// drain makes the queued writes, batch after batch, until none waits.
func (q *groupCommit[T]) drain(limit int, do func(batch []T) []error) {
	for {
		batch := q.next(limit)
		if len(batch) == 0 {
			return
		}
		ws := make([]T, len(batch))
		for i, b := range batch {
			ws[i] = b.w
		}
		for i, err := range do(ws) {
			batch[i].done <- err
		}
	}
}

// next takes the next batch off the queue, or ends the drain when the
// queue is empty.
func (q *groupCommit[T]) next(limit int) []queued[T] {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) == 0 {
		q.draining = false
		return nil
	}
	var batch, rest []queued[T]
	runs := map[int64]bool{}
	for _, w := range q.waiting {
		if runs[w.run] || len(batch) == limit {
			rest = append(rest, w)
			continue
		}
		runs[w.run] = true
		batch = append(batch, w)
	}
	q.waiting = rest
	return batch
}
