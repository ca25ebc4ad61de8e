package runtime_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// stepsYAML is a run of 20 rounds, each calling the no-op tool: 40 steps
// whose cost is the engine's and the store's alone.
func stepsYAML() string {
	var b strings.Builder
	b.WriteString("identifier: steps\nmax_iterations: 20\ntools: [noop]\nprovider:\n  type: scripted\n  script:\n    rounds:\n")
	for i := 1; i < 20; i++ {
		fmt.Fprintf(&b, "      - text: \"round %d\"\n        tool_calls: [{name: noop, arguments: {n: %d}}]\n", i, i)
	}
	b.WriteString("      - text: \"done\"\n")
	return b.String()
}

// BenchmarkStepOverhead measures what one recorded step of a continuation
// costs on MySQL (checkpoint, event append and lease renewal in one
// commit, plus the observer), beside two references timed in the same run
// on the same database: the floor, the least any step can do that checks its lease in its own transaction (a
// lease UPDATE of the run and one INSERT in one transaction, one round
// trip; BenchmarkCommit/floor), and a bare single-row commit (an autocommit
// INSERT into a two-column table). The target is at most 1.3 times the
// floor (step/floor). Only the continuations are timed, not the Start that
// creates their runs; after each continuation as many floors and bare
// commits run as it recorded steps, so that all three see the same disk
// and the same neighbours.
func BenchmarkStepOverhead(b *testing.B) {
	f := newFixture(b, 0, stepsYAML())
	ctx := context.Background()
	if _, err := f.DB.Exec(`CREATE TABLE bare (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	var stepTime, floorTime, bareTime time.Duration
	steps, observed := 0, 0
	obs := runtime.ObserverFunc(func(runtime.Step) { observed++ })
	b.ResetTimer()
	for steps < b.N {
		c, err := f.Engine.Start(ctx, runtime.StartRequest{Configuration: "steps", Prompt: "go", Owner: f.owner})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		out := c.Run(ctx, obs)
		stepTime += time.Since(start)
		if out.Status != runtime.StatusCompleted {
			b.Fatalf("outcome %+v", out)
		}
		steps += out.Steps
		start = time.Now()
		for i := range out.Steps {
			// The same statements as BenchmarkCommit/floor, on the run
			// that just settled: its row is as wide as a running one's.
			if _, err := f.DB.ExecContext(ctx, `START TRANSACTION;
				UPDATE runs SET lease_expires_at = NOW(6) + INTERVAL 1 MINUTE WHERE id = ?;
				INSERT INTO bare (v) VALUES (?);
				COMMIT`, out.RunID, i); err != nil {
				b.Fatal(err)
			}
		}
		floorTime += time.Since(start)
		start = time.Now()
		for i := range out.Steps {
			if _, err := f.DB.ExecContext(ctx, `INSERT INTO bare (v) VALUES (?)`, i); err != nil {
				b.Fatal(err)
			}
		}
		bareTime += time.Since(start)
	}
	n := time.Duration(steps)
	perStep, floor, bare := stepTime/n, floorTime/n, bareTime/n
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(perStep.Nanoseconds()), "ns/step")
	b.ReportMetric(float64(floor.Nanoseconds()), "ns/floor")
	b.ReportMetric(float64(bare.Nanoseconds()), "ns/bare-commit")
	b.ReportMetric(float64(perStep)/float64(floor), "step/floor")
	b.ReportMetric(float64(perStep)/float64(bare), "step/bare")
	if observed != steps {
		b.Fatalf("observer saw %d of %d steps", observed, steps)
	}
}

// BenchmarkClaimContention races 64 deciders on one waiting run: one wins
// the claim, 63 are told already_resuming. It reports the cost of one
// decision attempt under that contention.
func BenchmarkClaimContention(b *testing.B) {
	f := newFixture(b, 0, twiceYAML)
	ctx := context.Background()
	const racers = 64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		paused, _ := f.Waiting(b, "twice")
		start := make(chan struct{})
		var ready, done sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for range racers {
			ready.Add(1)
			done.Go(func() {
				ready.Done()
				<-start
				_, err := f.Engine.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
					Decision: runtime.DecisionApprove, Actor: f.approver, Path: runtime.PathDurable})
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					wins++
				} else if c := runtime.CodeOf(err); c != runtime.CodeAlreadyResuming && c != runtime.CodeStaleTurn {
					b.Error(err)
				}
			})
		}
		ready.Wait()
		b.StartTimer()
		close(start)
		done.Wait()
		if wins != 1 {
			b.Fatalf("%d claims won, want 1", wins)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*racers), "ns/decision")
}
