package web

import (
	"context"
	"errors"
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

// workerWindow: a worker is alive when it was seen within this.
const workerWindow = 15 * time.Second

// errBusy: every continuation slot is taken and no worker could take the
// decision instead. Nothing was claimed.
var errBusy = errors.New("every continuation slot is taken")

// paths chooses where each decision's continuation runs and bounds the
// ones that run inside requests, like PHP-FPM's pm.max_children.
type paths struct {
	mode    string
	slots   chan struct{}
	workers WorkerCheck

	mu      sync.Mutex
	checked time.Time
	alive   bool
}

func newPaths(mode string, maxContinuations int, workers WorkerCheck) *paths {
	if mode == "" {
		mode = PathAuto
	}
	if maxContinuations <= 0 {
		maxContinuations = 512
	}
	return &paths{mode: mode, slots: make(chan struct{}, maxContinuations), workers: workers}
}

// workerAlive asks the database at most once a second.
func (p *paths) workerAlive(ctx context.Context) bool {
	if p.workers == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.checked) < time.Second {
		return p.alive
	}
	n, err := p.workers.WorkersAlive(ctx, workerWindow)
	p.alive, p.checked = err == nil && n > 0, time.Now()
	return p.alive
}

// choose picks the path of one decision, before anything is claimed:
// durable when configured so, or (auto) for a native POST while a worker
// is alive, so it never waits for the whole continuation; in the request
// otherwise, holding one of the slots until release is called. With every
// slot taken it falls back to the durable path when a worker is alive, and
// returns errBusy when none is.
func (p *paths) choose(ctx context.Context, streamed bool) (path string, release func(), err error) {
	noop := func() {}
	if p.mode == PathDurable || (p.mode == PathAuto && !streamed && p.workerAlive(ctx)) {
		return runtime.PathDurable, noop, nil
	}
	if release, ok := p.acquire(); ok {
		return runtime.PathRequest, release, nil
	}
	if p.workerAlive(ctx) {
		return runtime.PathDurable, noop, nil
	}
	return "", noop, errBusy
}

// acquire takes a slot for a continuation inside a request, without
// waiting; release gives it back (once, however often it is called).
func (p *paths) acquire() (release func(), ok bool) {
	select {
	case p.slots <- struct{}{}:
		var once sync.Once
		return func() { once.Do(func() { <-p.slots }) }, true
	default:
		return func() {}, false
	}
}

// InFlight is how many continuations run inside requests right now.
func (p *paths) InFlight() int { return len(p.slots) }
