package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/configfile"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

// demoRows counts what hangs off the runs with these ids, and the refunds.
func demoRows(t *testing.T, db *sqlx.DB, ids []int64) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, table := range []string{"run_events", "run_messages", "decisions", "standing_approvals", "runs"} {
		column := "run_id"
		if table == "runs" {
			column = "id"
		}
		q, args, err := sqlx.In(`SELECT COUNT(*) FROM `+table+` WHERE `+column+` IN (?)`, ids)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.Get(&n, q, args...); err != nil {
			t.Fatal(err)
		}
		got[table] = n
	}
	var n int
	if err := db.Get(&n, `SELECT COUNT(*) FROM demo_refunds`); err != nil {
		t.Fatal(err)
	}
	got["demo_refunds"] = n
	return got
}

func userHashes(t *testing.T, db *sqlx.DB) []string {
	t.Helper()
	var rows []string
	if err := db.Select(&rows, `SELECT CONCAT(name, ' ', password_hash) FROM users ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestDemoReset: after a decision in the demo (a refund, a standing
// approval, events and transcripts), demo reset deletes the demo's runs
// with everything that hangs off them and the refunds, starts the four
// waiting runs again, and leaves the users' passwords and the runs of
// other configurations alone.
func TestDemoReset(t *testing.T) {
	db, dsn := dbtest.New(t)
	ctx := context.Background()
	a, err := open(ctx, dbFlags{dsn: dsn, command: "test", getenv: func(string) string { return "" }}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.close)
	if err := seedDemo(ctx, a, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}

	// The tour's first step: the operator approves the refund, for the
	// session.
	var w struct {
		ID     int64  `db:"id"`
		Digest string `db:"turn_digest"`
	}
	if err := db.Get(&w, `SELECT r.id, r.turn_digest FROM runs r JOIN configurations c ON c.id = r.configuration_id
		WHERE c.identifier = 'refund-agent'`); err != nil {
		t.Fatal(err)
	}
	operator, err := a.store.UserByName(ctx, "operator")
	if err != nil {
		t.Fatal(err)
	}
	c, err := a.engine.Decide(ctx, runtime.DecideRequest{RunID: w.ID, Digest: w.Digest, Decision: runtime.DecisionApprove,
		Scope: runtime.ScopeSession, Actor: operator.Actor(), Path: runtime.PathRequest})
	if err != nil {
		t.Fatal(err)
	}
	if out := c.Run(ctx, nil); out.Err != nil || out.Status != runtime.StatusCompleted {
		t.Fatalf("the approved refund run ended %s, %v; want completed", out.Status, out.Err)
	}

	// A run of a configuration of someone else's, which stays.
	cfg, err := configfile.Parse("helpdesk.yaml", []byte(agentYAML), a.knownTool)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.store.SaveConfiguration(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	owner, err := a.store.UserByName(ctx, "user")
	if err != nil {
		t.Fatal(err)
	}
	other, err := a.engine.Start(ctx, runtime.StartRequest{Configuration: "helpdesk", Prompt: "Where is ORD-1001?", Owner: owner.Actor()})
	if err != nil {
		t.Fatal(err)
	}
	other.Run(ctx, nil)
	otherID := other.RunID()

	var demoIDs []int64
	if err := db.Select(&demoIDs, `SELECT r.id FROM runs r JOIN configurations c ON c.id = r.configuration_id
		WHERE c.identifier <> 'helpdesk' ORDER BY r.id`); err != nil {
		t.Fatal(err)
	}
	before := demoRows(t, db, demoIDs)
	for _, table := range []string{"run_events", "run_messages", "decisions", "standing_approvals", "demo_refunds"} {
		if before[table] == 0 {
			t.Fatalf("the decision left no rows in %s to delete: %v", table, before)
		}
	}
	otherBefore := demoRows(t, db, []int64{otherID})
	hashes := userHashes(t, db)

	stdout, stderr, err := turnstile(t, dsn, "demo", "reset")
	if err != nil {
		t.Fatalf("demo reset: %v (stderr %q)", err, stderr)
	}
	if want := "demo: deleted 4 runs and 1 refund\ndemo: 4 runs are waiting for a decision\n"; stdout != want {
		t.Errorf("demo reset stdout = %q, want %q", stdout, want)
	}
	after := demoRows(t, db, demoIDs)
	if want := map[string]int{"run_events": 0, "run_messages": 0, "decisions": 0, "standing_approvals": 0, "runs": 0, "demo_refunds": 0}; !reflect.DeepEqual(after, want) {
		t.Errorf("after demo reset the old demo runs left %v, want nothing", after)
	}
	got := readSeed(t, db)
	delete(got.runs, "helpdesk")
	got.runCount--
	got.configurations = strings.Fields(strings.ReplaceAll(strings.Join(got.configurations, " "), "helpdesk", ""))
	checkSeed(t, got)
	if got := demoRows(t, db, []int64{otherID}); !reflect.DeepEqual(got, map[string]int{"run_events": otherBefore["run_events"],
		"run_messages": otherBefore["run_messages"], "decisions": 0, "standing_approvals": 0, "runs": 1, "demo_refunds": 0}) {
		t.Errorf("the helpdesk run after demo reset: %v, want it as it was (%v)", got, otherBefore)
	}
	if got := userHashes(t, db); !reflect.DeepEqual(got, hashes) {
		t.Errorf("demo reset changed the users' passwords:\nbefore %q\nafter  %q", hashes, got)
	}

	// A run a live continuation holds stops the reset before it deletes
	// anything.
	var held int64
	if err := db.Get(&held, `SELECT r.id FROM runs r JOIN configurations c ON c.id = r.configuration_id
		WHERE c.identifier = 'slow-agent'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE runs SET claimed_by = 'elsewhere:1:ab', lease_expires_at = NOW(6) + INTERVAL 1 MINUTE WHERE id = ?`, held); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if err := db.Select(&ids, `SELECT id FROM runs ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	_, _, err = turnstile(t, dsn, "demo", "reset")
	if want := fmt.Sprintf("demo reset: run %d is being continued right now (by elsewhere:1:ab)", held); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("demo reset with a held run = %v, want %q", err, want)
	}
	var idsAfter []int64
	if err := db.Select(&idsAfter, `SELECT id FROM runs ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(idsAfter, ids) {
		t.Errorf("a refused reset changed the runs: %v, then %v", ids, idsAfter)
	}
}

// TestDemoResetWithoutADemo: on a database the demo never ran on, demo
// reset says what to do and creates nothing.
func TestDemoResetWithoutADemo(t *testing.T) {
	db, dsn := dbtest.New(t)
	_, _, err := turnstile(t, dsn, "demo", "reset")
	if err == nil || !strings.Contains(err.Error(), "start turnstile serve --demo (make run) once") {
		t.Errorf("demo reset without a demo = %v, want the hint", err)
	}
	if got := readSeed(t, db); len(got.configurations) != 0 || got.runCount != 0 {
		t.Errorf("a refused demo reset created %v", got)
	}
	for _, args := range [][]string{{"demo"}, {"demo", "replay"}, {"demo", "reset", "extra"}} {
		if _, _, err := turnstile(t, dsn, args...); err == nil || !strings.Contains(err.Error(), "usage: turnstile demo reset") {
			t.Errorf("turnstile %s = %v, want the usage", strings.Join(args, " "), err)
		}
	}
}
