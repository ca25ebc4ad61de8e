package testrig

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// State is everything a refused request must leave as it was: the run's
// row, its events, decisions and standing approvals, and every decision
// and refund in the database.
type State struct {
	Run                   runtime.Run
	Events, Decisions     int
	Standing              int
	AllDecisions, Refunds int
}

// State reads a run's State.
func (w *World) State(t testing.TB, id int64) State {
	t.Helper()
	s := State{Run: *w.Run(t, id)}
	for _, q := range []struct {
		sql  string
		args []any
		dst  *int
	}{
		{`SELECT COUNT(*) FROM run_events WHERE run_id = ?`, []any{id}, &s.Events},
		{`SELECT COUNT(*) FROM decisions WHERE run_id = ?`, []any{id}, &s.Decisions},
		{`SELECT COUNT(*) FROM standing_approvals WHERE run_id = ?`, []any{id}, &s.Standing},
		{`SELECT COUNT(*) FROM decisions`, nil, &s.AllDecisions},
		{`SELECT COUNT(*) FROM demo_refunds`, nil, &s.Refunds},
	} {
		*q.dst = w.Count(t, q.sql, q.args...)
	}
	return s
}

// Unchanged fails the test, naming what moved, when the run's State is
// not what it was before.
func (w *World) Unchanged(t testing.TB, id int64, before State) {
	t.Helper()
	after := w.State(t, id)
	if reflect.DeepEqual(before, after) {
		return
	}
	var moved []string
	diff := func(prefix string, b, a reflect.Value) {
		for i := range b.NumField() {
			if f := b.Type().Field(i); f.Name != "Run" && !reflect.DeepEqual(b.Field(i).Interface(), a.Field(i).Interface()) {
				moved = append(moved, fmt.Sprintf("%s%s %s → %s", prefix, f.Name, show(b.Field(i)), show(a.Field(i))))
			}
		}
	}
	diff("run.", reflect.ValueOf(before.Run), reflect.ValueOf(after.Run))
	diff("", reflect.ValueOf(before), reflect.ValueOf(after))
	t.Errorf("run %d: the database moved: %s", id, strings.Join(moved, "; "))
}

// show formats a field for Unchanged: what a pointer points to, bytes as
// text.
func show(v reflect.Value) string {
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if b, ok := v.Interface().([]byte); ok {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%v", v.Interface())
}

// Count runs a SELECT COUNT(*) query and returns the count.
func (w *World) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := w.DB.Get(&n, query, args...); err != nil {
		t.Fatalf("testrig: %s: %v", query, err)
	}
	return n
}

// Refunds counts the refunds of an order.
func (w *World) Refunds(t testing.TB, order string) int {
	t.Helper()
	n, err := w.Store.RefundCount(context.Background(), order)
	if err != nil {
		t.Fatalf("testrig: refunds of %s: %v", order, err)
	}
	return n
}

// Events returns a run's stored events in order.
func (w *World) Events(t testing.TB, id int64) []runtime.Event {
	t.Helper()
	evs, err := w.Store.Events(context.Background(), id, 0)
	if err != nil {
		t.Fatalf("testrig: events of run %d: %v", id, err)
	}
	return evs
}

// Gapless returns a run's events and fails the test (and goes on) unless
// their seqs are 1, 2, 3, … with neither a gap nor a duplicate.
func (w *World) Gapless(t testing.TB, id int64) []runtime.Event {
	t.Helper()
	evs := w.Events(t, id)
	for i, e := range evs {
		if e.Seq != i+1 {
			var seqs []int
			for _, e := range evs {
				seqs = append(seqs, e.Seq)
			}
			t.Errorf("run %d: event seqs %v, want 1..%d consecutive without duplicates", id, seqs, len(evs))
			break
		}
	}
	return evs
}

// CountKind counts the events of a kind.
func CountKind(evs []runtime.Event, kind runtime.EventKind) int {
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

// CountSteps counts the events that are steps (runtime.EventKind.Step):
// what a stream counts.
func CountSteps(evs []runtime.Event) int {
	n := 0
	for _, e := range evs {
		if e.Kind.Step() {
			n++
		}
	}
	return n
}

// Decision is a decision as stored.
type Decision struct {
	Digest   string `db:"turn_digest"`
	Kind     string `db:"kind"`
	Path     string `db:"path"`
	Executed bool   `db:"executed"`
	Outcome  string `db:"outcome"`
}

// Decisions returns a run's decisions in the order they were made.
func (w *World) Decisions(t testing.TB, id int64) []Decision {
	t.Helper()
	var ds []Decision
	if err := w.DB.Select(&ds, `SELECT turn_digest, kind, path, executed_at IS NOT NULL AS executed,
		COALESCE(outcome, '') AS outcome FROM decisions WHERE run_id = ? ORDER BY id`, id); err != nil {
		t.Fatalf("testrig: decisions of run %d: %v", id, err)
	}
	return ds
}
