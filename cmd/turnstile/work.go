package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// heartbeatEvery is how often a process refreshes its workers row; a
// worker counts as alive when seen within 15 s.
const heartbeatEvery = 5 * time.Second

// pollEvery is how long an idle worker waits before looking again.
const pollEvery = 200 * time.Millisecond

// workers runs n worker loops and keeps this process's workers row fresh
// until ctx ends; stop drains the engine (runs in flight are handed back at
// their next step boundary) and waits for the loops, at most until wait
// ends.
func startWorkers(ctx context.Context, a *app, n int) (stop func(wait context.Context)) {
	if n <= 0 {
		return func(context.Context) {}
	}
	host, _ := os.Hostname()
	b := make([]byte, 4)
	rand.Read(b)
	id := fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(b))
	if len(id) > 64 {
		id = id[len(id)-64:]
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			if err := a.store.Heartbeat(wctx, id, host, os.Getpid()); err != nil && wctx.Err() == nil {
				a.log.Warn("worker heartbeat failed", "err", err)
			}
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
		}
	})
	wg.Go(func() { a.engine.Work(wctx, n, pollEvery) })
	wg.Go(func() { a.deliver(wctx) })
	wg.Go(func() { a.sweep(wctx) })
	a.log.Info("workers started", "worker", id, "loops", n)
	return func(wait context.Context) {
		a.engine.Drain()
		cancel()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-wait.Done():
			a.log.Warn("workers still busy at the shutdown deadline; their leases will expire and another worker recovers the runs")
		}
		if err := a.store.RemoveWorker(context.WithoutCancel(ctx), id); err != nil {
			a.log.Warn("remove worker row", "err", err)
		}
	}
}

// sweep deletes expired and revoked API tokens and expired sessions until
// ctx ends: every process that runs workers does, each at moments of its
// own.
func (a *app) sweep(ctx context.Context) {
	var sm runtime.SweepMetrics // nil counts nothing
	if a.metrics != nil {
		sm = a.metrics
	}
	runtime.NewSweeper(runtime.SweepOptions{Store: a.store, Metrics: sm, Logger: a.log}).Run(ctx)
}

// work runs worker loops only: it executes decided and queued runs and
// recovers runs whose holder died, until SIGTERM.
func work(ctx context.Context, args []string, e env) error {
	fs := newFlagSet("work", e)
	var d dbFlags
	d.register(fs)
	n := fs.Int("workers", 2, "worker loops in this process")
	shutdownTimeout := fs.Duration("shutdown-timeout", 25*time.Second, "how long a shutdown waits for runs in flight to be handed back")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	metricsAddr := fs.String("metrics-addr", "", "address to serve GET /metrics on, e.g. 127.0.0.1:9090 (none when empty)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *n <= 0 {
		return errors.New("--workers must be at least 1")
	}
	a, err := openLogged(ctx, d, e, *logLevel)
	if err != nil {
		return err
	}
	defer a.close()
	var scrape *http.Server
	if *metricsAddr != "" {
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", a.metrics)
		scrape = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: writeTimeout,
			ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
		go func() {
			if err := scrape.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				a.log.Error("metrics server", "err", err)
			}
		}()
		a.log.Info("serving metrics", "addr", ln.Addr().String())
		a.self = append(a.self, ln.Addr().String())
	}
	stop := startWorkers(ctx, a, *n)
	<-ctx.Done()
	a.log.Info("shutting down", "timeout", shutdownTimeout.String())
	wait, cancel := context.WithTimeout(context.WithoutCancel(ctx), *shutdownTimeout)
	defer cancel()
	stop(wait)
	if scrape != nil {
		scrape.Shutdown(wait)
	}
	return nil
}
