package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/web"
)

// bulkEntries is a POST /api/decisions body's entries: each run with its
// digest, approved.
func bulkEntries(runs []runtime.Outcome, digest func(runtime.Outcome) string) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = fmt.Sprintf(`{"run_id":%d,"turn_digest":%q,"decision":"approve"}`, r.RunID, digest(r))
	}
	return out
}

// unknownRuns are n runs that do not exist.
func unknownRuns(n int) []runtime.Outcome {
	out := make([]runtime.Outcome, n)
	for i := range out {
		out[i] = runtime.Outcome{RunID: int64(1_000_000 + i)}
	}
	return out
}

func asIs(r runtime.Outcome) string  { return r.Digest }
func stale(runtime.Outcome) string   { return staleDigest }
func bulkOf(entries []string) string { return `{"decisions":[` + strings.Join(entries, ",") + `]}` }

// TestAPIBulkOverTheLimit: a bulk of 501 entries is refused whole,
// invalid_bulk naming the limit, and claims nothing — whatever follows
// its entry 501, which is not read.
func TestAPIBulkOverTheLimit(t *testing.T) {
	a := newApp(t, 0)
	x, _ := a.Waiting(t, "refund")
	y, _ := a.Waiting(t, "refund")
	bx, by := a.State(t, x.RunID), a.State(t, y.RunID)
	entries := append(bulkEntries([]runtime.Outcome{x, y}, asIs), bulkEntries(unknownRuns(runtime.MaxBulk-1), stale)...)
	api := a.bearer(t, "approver", "run:decide")
	for name, body := range map[string]string{
		"501 entries": bulkOf(entries),
		"501 entries, then text that is not UTF-8": bulkOf(append(entries,
			`{"run_id":7,"turn_digest":"`+staleDigest+`","decision":"approve","reason":"`+strings.Repeat("\xff", 100)+`"}`)),
	} {
		t.Run(name, func(t *testing.T) {
			e := api.call(t, a, http.MethodPost, "/api/decisions", body, nil).wantError(t, http.StatusBadRequest, "invalid_bulk")
			if msg, _ := e["message"].(string); !strings.Contains(msg, "at most 500") {
				t.Errorf("message %q, want it to name the limit, at most 500", msg)
			}
		})
	}
	if n := a.Count(t, `SELECT COUNT(*) FROM decisions`); n != 0 {
		t.Errorf("%d decisions after refused bulks, want none", n)
	}
	a.Unchanged(t, x.RunID, bx)
	a.Unchanged(t, y.RunID, by)
}

// TestBulkTakesASlotPerClaim: a bulk takes a continuation slot for each
// run it is about to claim, once every check passed, not one per entry
// before any check. With every slot taken, a bulk whose runs are all
// refused is answered with their refusals, not 503; and a bulk of 500
// whose last 3 runs are claimed runs those 3 in the request's 3 slots
// rather than handing them to a worker because its first 3 entries held
// the slots.
func TestBulkTakesASlotPerClaim(t *testing.T) {
	t.Run("refused runs take no slot", func(t *testing.T) {
		a := newApp(t, 0, func(d *web.Deps) { d.MaxContinuations = 2 })
		release := a.server.HoldSlots(2)
		defer release()
		x, _ := a.Waiting(t, "refund")
		entries := append(bulkEntries([]runtime.Outcome{x}, stale), bulkEntries(unknownRuns(runtime.MaxBulk-1), stale)...)
		got := a.bearer(t, "approver", "run:decide").call(t, a, http.MethodPost, "/api/decisions", bulkOf(entries), nil)
		if got.status != http.StatusOK {
			t.Fatalf("bulk of refused runs with every slot taken: %d %s, want 200 with the refusals", got.status, got.body)
		}
		results, _ := got.object(t)["results"].([]any)
		if len(results) != runtime.MaxBulk {
			t.Fatalf("%d results, want %d", len(results), runtime.MaxBulk)
		}
		if r, _ := results[0].(map[string]any); r["status"] != string(runtime.CodeStaleTurn) {
			t.Errorf("result of the stale run %v, want stale_turn", r)
		}
		if n := a.server.SlotsInUse(); n != 2 {
			t.Errorf("%d slots in use, want the 2 held", n)
		}
	})
	t.Run("claimed runs take a slot each", func(t *testing.T) {
		a := newApp(t, 0, func(d *web.Deps) { d.MaxContinuations, d.Workers = 3, aliveWorkers{} })
		var runs []runtime.Outcome
		for range 3 {
			out, _ := a.Waiting(t, "refund")
			runs = append(runs, out)
		}
		entries := append(bulkEntries(unknownRuns(runtime.MaxBulk-3), stale), bulkEntries(runs, asIs)...)
		got := a.bearer(t, "approver", "run:decide").call(t, a, http.MethodPost, "/api/decisions", bulkOf(entries),
			http.Header{"Accept": {"application/x-ndjson"}})
		for _, l := range got.lines(t) {
			if l["type"] == "settled" && l["path"] == runtime.PathDurable {
				t.Errorf("run %v went to a worker, want it run in one of the 3 free slots", l["run"])
			}
		}
		for _, out := range runs {
			if r := a.Run(t, out.RunID); r.Status != runtime.StatusCompleted {
				t.Errorf("run %d is %s, want completed in the request", out.RunID, r.Status)
			}
		}
		if n := a.server.SlotsInUse(); n != 0 {
			t.Errorf("%d slots in use after the bulk, want 0", n)
		}
	})
}
