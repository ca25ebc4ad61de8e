package runtime_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// BenchmarkDurableVotes measures votes recorded per second: 64 deciders
// at once, each approval the first of two a turn needs (a vote that claims
// nothing), every one on a run of its own, beside single durable
// decisions of one-approval turns timed the same way (decisions/s). Only
// the deciding is timed, not the runs' start. Run it with -benchtime Nx:
// it prepares N runs for each.
func BenchmarkDurableVotes(b *testing.B) {
	for _, tc := range []struct {
		name, cfg string
		vote      bool
	}{{"votes", votesYAML, true}, {"decisions", twiceYAML, false}} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFixture(b, 0, tc.cfg)
			ctx := context.Background()
			paused := make([]runtime.Outcome, b.N)
			for i := range paused {
				paused[i], _ = f.Waiting(b, map[bool]string{true: "votes", false: "twice"}[tc.vote])
			}
			const clients = 64
			next := make(chan runtime.Outcome, len(paused))
			for _, p := range paused {
				next <- p
			}
			close(next)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range clients {
				wg.Go(func() {
					for p := range next {
						c, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: p.RunID, Digest: p.Digest,
							Decision: runtime.DecisionApprove, Actor: f.approver, Path: runtime.PathDurable})
						switch {
						case tc.vote && !errors.As(err, new(*runtime.Voted)):
							b.Errorf("run %d: %v, want a vote recorded", p.RunID, err)
						case !tc.vote && (err != nil || c != nil):
							b.Errorf("run %d: %v, want the decision recorded", p.RunID, err)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), tc.name+"/s")
		})
	}
}
