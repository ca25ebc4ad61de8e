package runtime_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// recordingMetrics remembers what the engine told it.
type recordingMetrics struct {
	mu              sync.Mutex
	inFlight, runs  int
	steps           []runtime.EventKind
	decisions, lost []string
	badStep         bool
	recovered       int
	expired         []string
}

func (m *recordingMetrics) DecisionExpired(action string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expired = append(m.expired, action)
}

func (m *recordingMetrics) ContinuationStarted() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight++
	m.runs++
}

func (m *recordingMetrics) ContinuationEnded() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inFlight--
}

func (m *recordingMetrics) StepRecorded(kind runtime.EventKind, took, commit time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.steps = append(m.steps, kind)
	m.badStep = m.badStep || commit <= 0 || took < commit
}

func (m *recordingMetrics) DecisionClaimed(path, kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.decisions = append(m.decisions, path+"/"+kind)
}

func (m *recordingMetrics) ClaimLost(reason runtime.Code) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lost = append(m.lost, string(reason))
}

func (m *recordingMetrics) Recovered() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recovered++
}

func TestEngineTellsTheMetrics(t *testing.T) {
	f := newFixture(t, 0, refundYAML)
	m := &recordingMetrics{}
	eng := f.NewEngine(runtime.Options{Metrics: m})
	ctx := context.Background()

	// Decisions of one turn race: one claim wins, every claim that loses
	// is already_resuming.
	paused, _ := f.Waiting(t, "refund")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []runtime.Outcome
	for range 8 {
		wg.Go(func() {
			c, err := eng.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
				Decision: runtime.DecisionApprove, Actor: f.approver})
			if err != nil {
				if code := runtime.CodeOf(err); code != runtime.CodeAlreadyResuming {
					t.Errorf("losing decision: %v, want already_resuming", err)
				}
				return
			}
			out := c.Run(ctx, nil)
			mu.Lock()
			won = append(won, out)
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d decisions won, want 1", len(won))
	}
	m.mu.Lock()
	if got := strings.Join(m.decisions, ","); got != "request/approve" {
		t.Errorf("decisions claimed: %s, want request/approve", got)
	}
	for _, r := range m.lost {
		if r != string(runtime.CodeAlreadyResuming) {
			t.Errorf("a lost claim counted as %s, want already_resuming", r)
		}
	}
	if len(m.steps) != won[0].Steps || m.steps[0] != runtime.KindApproval || m.steps[len(m.steps)-1] != runtime.KindSettle {
		t.Errorf("steps told %v, want the outcome's %d steps from approval to settle", m.steps, won[0].Steps)
	}
	if m.badStep {
		t.Error("a step's time was shorter than its commit, or its commit took no time")
	}
	if m.runs != 1 || m.inFlight != 0 {
		t.Errorf("continuations started %d, in flight after %d; want 1 and 0", m.runs, m.inFlight)
	}
	m.lost, m.decisions = nil, nil
	m.mu.Unlock()

	// A stale digest loses its claim as stale_turn; a durable decision is
	// counted on its path.
	paused, _ = f.Waiting(t, "refund")
	if _, err := eng.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: strings.Repeat("0", 64),
		Decision: runtime.DecisionApprove, Actor: f.approver}); runtime.CodeOf(err) != runtime.CodeStaleTurn {
		t.Fatalf("stale decision: %v, want stale_turn", err)
	}
	if _, err := eng.Decide(ctx, runtime.DecideRequest{RunID: paused.RunID, Digest: paused.Digest,
		Decision: runtime.DecisionDeny, Actor: f.approver, Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if got := strings.Join(m.lost, ","); got != "stale_turn" {
		t.Errorf("lost claims: %s, want stale_turn", got)
	}
	if got := strings.Join(m.decisions, ","); got != "durable/deny" {
		t.Errorf("decisions claimed: %s, want durable/deny", got)
	}
}
