package web

import (
	"context"
	"sync"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// Decision paths, as --decision-path names them.
const (
	PathAuto    = "auto"
	PathRequest = "request"
	PathDurable = "durable"
)

// WorkerCheck tells whether a worker process is alive to take durable
// decisions.
type WorkerCheck interface {
	WorkersAlive(ctx context.Context, window time.Duration) (int, error)
}

// admission chooses where each decision's continuation runs — inside its
// request, or with a worker (the durable path) — and bounds the ones that
// run inside requests, like PHP-FPM's pm.max_children.
type admission struct {
	mode    string
	slots   chan struct{}
	workers WorkerCheck

	mu      sync.Mutex
	checked time.Time
	alive   bool
}

func newAdmission(mode string, maxContinuations int, workers WorkerCheck) *admission {
	if mode == "" {
		mode = PathAuto
	}
	if maxContinuations <= 0 {
		maxContinuations = 512
	}
	return &admission{mode: mode, slots: make(chan struct{}, maxContinuations), workers: workers}
}

// workerAlive asks the database at most once a second.
func (p *admission) workerAlive(ctx context.Context) bool {
	if p.workers == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.checked) < time.Second {
		return p.alive
	}
	n, err := p.workers.WorkersAlive(ctx, runtime.WorkerWindow)
	p.alive, p.checked = err == nil && n > 0, time.Now()
	return p.alive
}

// want is what a request would have of the path of its continuation.
type want int

const (
	// wantStream: the client follows the continuation, so it runs in the
	// request whenever a slot is free (unless --decision-path durable).
	wantStream want = iota
	// wantAnswer: a native form post waits for its answer, so it takes the
	// durable path while a worker is alive (unless --decision-path
	// request), and is answered at once instead of after the whole
	// continuation.
	wantAnswer
	// wantRequest: the continuation runs in the request or not at all (the
	// playground exists to watch it).
	wantRequest
)

// choose picks the path of one decision before anything is claimed. In the
// request it holds one of the slots until release is called; with every
// slot taken it falls back to the durable path when a worker is alive
// (never for wantRequest), and returns errBusy when none is.
func (p *admission) choose(ctx context.Context, w want) (path string, release func(), err error) {
	noop := func() {}
	if w != wantRequest && (p.mode == PathDurable || (p.mode == PathAuto && w == wantAnswer && p.workerAlive(ctx))) {
		return runtime.PathDurable, noop, nil
	}
	if release, ok := p.acquire(); ok {
		return runtime.PathRequest, release, nil
	}
	if w != wantRequest && p.workerAlive(ctx) {
		return runtime.PathDurable, noop, nil
	}
	return "", noop, errBusy
}

// acquire takes a slot for a continuation inside a request, without
// waiting; release gives it back (once, however often it is called).
func (p *admission) acquire() (release func(), ok bool) {
	select {
	case p.slots <- struct{}{}:
		return p.releaser(), true
	default:
		return func() {}, false
	}
}

// waitSlot takes a continuation slot, waiting for one to free up: a run
// of a bulk beyond the free slots, claimed already, waits its turn. It
// does not give up when the client leaves.
func (p *admission) waitSlot() (release func()) {
	p.slots <- struct{}{}
	return p.releaser()
}

// releaser gives a taken slot back, once however often it is called.
func (p *admission) releaser() func() {
	var once sync.Once
	return func() { once.Do(func() { <-p.slots }) }
}

// SlotsInUse is how many continuations run inside requests right now.
func (p *admission) SlotsInUse() int { return len(p.slots) }

// SlotsTotal is how many may (--max-continuations).
func (p *admission) SlotsTotal() int { return cap(p.slots) }
