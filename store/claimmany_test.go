package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

const bulkYAML = `
identifier: refund
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - text: "done"
tools: [refund_order]
`

// ClaimMany wins the claims whose run still waits on the claimed turn and
// loses the others (a stale digest, a missing run); a chunk that fails as
// a whole — here on a decision the table already holds — is rolled back
// and claimed one run at a time, so the run with that decision loses and
// the others still win, each with exactly one decision.
func TestClaimMany(t *testing.T) {
	w := testrig.New(t, testrig.Configs(bulkYAML))
	ctx := context.Background()
	approver := w.Actor("approver")
	claim := func(out runtime.Outcome, digest string) runtime.Claim {
		return runtime.Claim{RunID: out.RunID, From: runtime.StatusWaitingForApproval, Digest: digest, To: runtime.StatusDecided,
			Decision: runtime.DecisionRecord{Kind: runtime.DecisionApprove, Scope: runtime.ScopeOnce, Tools: "refund_order",
				DecidedBy: approver.ID, Path: runtime.PathDurable}}
	}
	var runs []runtime.Outcome
	for range 4 {
		out, _ := w.Waiting(t, "refund")
		runs = append(runs, out)
	}
	missing := runs[0]
	missing.RunID = 999999

	t.Run("won and lost", func(t *testing.T) {
		errs := w.Store.ClaimMany(ctx, []runtime.Claim{claim(runs[1], runs[1].Digest), claim(runs[0], strings.Repeat("0", 64)),
			claim(missing, runs[0].Digest)})
		if errs[0] != nil || !errors.Is(errs[1], runtime.ErrClaimLost) || !errors.Is(errs[2], runtime.ErrClaimLost) {
			t.Fatalf("errs = %v, want nil, claim lost, claim lost", errs)
		}
		if r := w.Run(t, runs[1].RunID); r.Status != runtime.StatusDecided || len(w.Decisions(t, runs[1].RunID)) != 1 {
			t.Errorf("the won run is %s with %d decisions", r.Status, len(w.Decisions(t, runs[1].RunID)))
		}
		if r := w.Run(t, runs[0].RunID); r.Status != runtime.StatusWaitingForApproval || len(w.Decisions(t, runs[0].RunID)) != 0 {
			t.Errorf("the stale claim moved its run: %s", r.Status)
		}
	})
	t.Run("a chunk that fails", func(t *testing.T) {
		if _, err := w.DB.Exec(`INSERT INTO decisions (run_id, turn_digest, kind, tools, scope, reason, decided_by, path)
			VALUES (?, ?, 'deny', 'refund_order', 'once', '', ?, 'durable')`, runs[2].RunID, runs[2].Digest, approver.ID); err != nil {
			t.Fatal(err)
		}
		errs := w.Store.ClaimMany(ctx, []runtime.Claim{claim(runs[3], runs[3].Digest), claim(runs[2], runs[2].Digest),
			claim(runs[0], runs[0].Digest)})
		if errs[0] != nil || !errors.Is(errs[1], runtime.ErrClaimLost) || errs[2] != nil {
			t.Fatalf("errs = %v, want nil, claim lost, nil", errs)
		}
		for _, out := range []runtime.Outcome{runs[3], runs[0]} {
			if r := w.Run(t, out.RunID); r.Status != runtime.StatusDecided || len(w.Decisions(t, out.RunID)) != 1 {
				t.Errorf("run %d is %s with %d decisions, want decided with one", out.RunID, r.Status, len(w.Decisions(t, out.RunID)))
			}
		}
		if r := w.Run(t, runs[2].RunID); r.Status != runtime.StatusWaitingForApproval {
			t.Errorf("the run with a decision already is %s, want it still waiting", r.Status)
		}
	})
}

// A claim that carries a credential mints it in its own commit, alone or
// in a bulk's chunk, under the claim's holder, and only if it wins: the
// credential introspects as the run's owner while the claim holds the
// run, and a lost claim (a stale digest) writes none.
func TestClaimsMintTheirCredential(t *testing.T) {
	w := testrig.New(t, testrig.Configs(bulkYAML))
	ctx := context.Background()
	approver := w.Actor("approver")
	claim := func(out runtime.Outcome, digest string) runtime.Claim {
		return runtime.Claim{RunID: out.RunID, From: runtime.StatusWaitingForApproval, Digest: digest, To: runtime.StatusRunning,
			ClaimedBy: "holder-" + strings.Repeat("x", 4), Lease: time.Minute,
			Decision: runtime.DecisionRecord{Kind: runtime.DecisionApprove, Scope: runtime.ScopeOnce, Tools: "refund_order",
				DecidedBy: approver.ID, Path: runtime.PathRequest},
			Credential: &runtime.CredentialMint{Token: runtime.NewRunToken(), OwnerID: w.Run(t, out.RunID).OwnerID, TTL: time.Hour}}
	}
	var runs []runtime.Outcome
	for range 4 {
		out, _ := w.Waiting(t, "refund")
		runs = append(runs, out)
	}
	one, stale := claim(runs[0], runs[0].Digest), claim(runs[1], strings.Repeat("0", 64))
	bulk := []runtime.Claim{claim(runs[2], runs[2].Digest), claim(runs[3], runs[3].Digest)}
	if err := w.Store.Claim(ctx, one); err != nil {
		t.Fatal(err)
	}
	if err := w.Store.Claim(ctx, stale); !errors.Is(err, runtime.ErrClaimLost) {
		t.Fatalf("a stale claim = %v, want lost", err)
	}
	for i, err := range w.Store.ClaimMany(ctx, bulk) {
		if err != nil {
			t.Fatalf("bulk claim %d: %v", i, err)
		}
	}
	for _, c := range append([]runtime.Claim{one}, bulk...) {
		id, err := w.Store.IntrospectRunToken(ctx, c.Credential.Token)
		if err != nil || id.RunID != c.RunID || id.User.ID != c.Credential.OwnerID {
			t.Errorf("run %d's credential introspects as %+v, %v; want its run and owner", c.RunID, id, err)
		}
	}
	if n := w.Count(t, `SELECT COUNT(*) FROM run_tokens WHERE run_id = ?`, stale.RunID); n != 0 {
		t.Errorf("the lost claim wrote %d credentials, want none", n)
	}
}
