package runtime

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"
)

// SweepStore is what sweeping needs of the database: deletes of dead
// rows, each taking at most its limit of them and reporting how many it
// took.
type SweepStore interface {
	// DeleteDeadTokens deletes API tokens that expired or were revoked.
	DeleteDeadTokens(ctx context.Context, limit int) (int, error)
	// DeleteExpiredSessions deletes sign-in sessions whose expiry passed.
	DeleteExpiredSessions(ctx context.Context, limit int) (int, error)
	// DeleteOldChanges deletes the feed's change-log rows older than
	// ChangeRetention.
	DeleteOldChanges(ctx context.Context, limit int) (int, error)
	// DeleteExpiredRunTokens deletes run credentials whose expiry passed.
	DeleteExpiredRunTokens(ctx context.Context, limit int) (int, error)
}

// SweepMetrics is told how many dead rows of a kind (SweptToken,
// SweptSession) a pass deleted.
type SweepMetrics interface {
	Swept(kind string, n int)
}

// The kinds of rows a sweep deletes, as SweepMetrics is told them.
const (
	SweptToken    = "token"
	SweptSession  = "session"
	SweptChange   = "change"
	SweptRunToken = "run_token"
)

type noSweepMetrics struct{}

func (noSweepMetrics) Swept(string, int) {}

// Sweep defaults: a pass every five minutes, at most ten statements of 500
// rows of each kind.
const (
	DefaultSweepEvery   = 5 * time.Minute
	DefaultSweepBatch   = 500
	DefaultSweepBatches = 10
)

// SweepOptions are a Sweeper's dependencies; Store is required.
type SweepOptions struct {
	Store   SweepStore
	Metrics SweepMetrics
	Logger  *slog.Logger
	// Every is the mean time between passes (DefaultSweepEvery when zero).
	Every time.Duration
	// Batch is how many rows one statement deletes at most, and Batches
	// how many statements of each kind one pass runs at most: a statement
	// holds its locks briefly, and a pass ends in bounded time however
	// much is dead. What is left waits for the next pass.
	Batch, Batches int
}

// Swept says what one pass deleted.
type Swept struct {
	Tokens, Sessions, Changes, RunTokens int
}

// Sweeper deletes what can never be used again — expired and revoked API
// tokens, expired sessions, the feed's changes older than ChangeRetention — so that neither table grows for ever. Every
// process that runs workers runs one.
type Sweeper struct {
	o SweepOptions
}

// NewSweeper returns a sweeper.
func NewSweeper(o SweepOptions) *Sweeper {
	if o.Metrics == nil {
		o.Metrics = noSweepMetrics{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Every <= 0 {
		o.Every = DefaultSweepEvery
	}
	if o.Batch <= 0 {
		o.Batch = DefaultSweepBatch
	}
	if o.Batches <= 0 {
		o.Batches = DefaultSweepBatches
	}
	return &Sweeper{o: o}
}

// Run sweeps until ctx ends: its first pass at a random moment within
// Every, so that processes started together do not sweep together, then a
// pass every 0.75 to 1.25 Every. A pass that fails is logged and the next
// one tried in its time.
func (s *Sweeper) Run(ctx context.Context) {
	wait := time.Duration(rand.Int64N(int64(s.o.Every))) + 1
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		got, err := s.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			s.o.Logger.Warn("sweep failed", "err", err)
		}
		if got != (Swept{}) {
			s.o.Logger.Info("swept", "tokens", got.Tokens, "sessions", got.Sessions, "changes", got.Changes, "run_tokens", got.RunTokens)
		}
		wait = s.o.Every*3/4 + time.Duration(rand.Int64N(int64(s.o.Every/2)+1))
	}
}

// Pass deletes the dead rows of each kind, a batch per statement, until a
// batch is not full or Batches of them ran, and counts them in the
// metrics. It reports what it deleted, also when it stopped at an error.
func (s *Sweeper) Pass(ctx context.Context) (Swept, error) {
	var got Swept
	var errs []error
	for _, k := range []struct {
		kind   string
		delete func(context.Context, int) (int, error)
		n      *int
	}{
		{SweptToken, s.o.Store.DeleteDeadTokens, &got.Tokens},
		{SweptSession, s.o.Store.DeleteExpiredSessions, &got.Sessions},
		{SweptChange, s.o.Store.DeleteOldChanges, &got.Changes},
		{SweptRunToken, s.o.Store.DeleteExpiredRunTokens, &got.RunTokens},
	} {
		for range s.o.Batches {
			n, err := k.delete(ctx, s.o.Batch)
			*k.n += n
			if err != nil {
				errs = append(errs, err)
			}
			if err != nil || n < s.o.Batch {
				break
			}
		}
		s.o.Metrics.Swept(k.kind, *k.n)
	}
	return got, errors.Join(errs...)
}
