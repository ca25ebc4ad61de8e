package main

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/seal"
	"github.com/turnstile-dev/turnstile/runtime/tool/builtin"
	"github.com/turnstile-dev/turnstile/store/dbtest"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// resealYAML keeps content in every sealed column: at the full privacy
// level the events carry it, and its notifications are written to the
// outbox.
const resealYAML = `
identifier: reseal
privacy_level: full
provider:
  type: scripted
  script:
    rounds:
      - text: "Refunding."
        tool_calls:
          - name: refund_order
            arguments: {order_id: "${order_id}", reason: "RESEAL-MARKER"}
      - text: "Refunded."
tools: [refund_order]
notify:
  - url: https://hooks.example.com/t
`

// sealedColumns are the columns that hold run content, and the column of
// their table that names the run.
var sealedColumns = []struct{ table, column, run string }{
	{"runs", "state", "id"}, {"runs", "prompt", "id"}, {"runs", "answer", "id"},
	{"run_messages", "body", "run_id"}, {"run_events", "payload", "run_id"},
	{"decisions", "reason", "run_id"}, {"decisions", "input", "run_id"}, {"decisions", "arguments", "run_id"},
	{"decisions", "calls", "run_id"},
	{"webhook_deliveries", "body", "run_id"},
}

var (
	resealKeyA = bytes.Repeat([]byte{0xA1}, 32)
	resealKeyB = bytes.Repeat([]byte{0xB2}, 16)
	resealKeyC = bytes.Repeat([]byte{0xC3}, 24)
)

func keyEntry(id string, key []byte) string { return id + ":" + base64.StdEncoding.EncodeToString(key) }

// sealV1 seals as Turnstile did before sealed content was bound to its
// place: "tse1:" id ":" nonce ciphertext, the header its only additional
// data.
func sealV1(t *testing.T, id string, key, plain []byte) []byte {
	t.Helper()
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	header := []byte("tse1:" + id + ":")
	nonce := make([]byte, aead.NonceSize())
	rand.Read(nonce)
	return aead.Seal(append(bytes.Clone(header), nonce...), nonce, plain, header)
}

// reseal runs "turnstile state reseal" with the state keys of spec (none
// when empty); stderr, when not nil, also gets what it writes there.
func reseal(ctx context.Context, t *testing.T, dsn, spec string, stderr *cancelWriter, args ...string) (string, string, error) {
	t.Helper()
	var out bytes.Buffer
	errOut := &cancelWriter{}
	if stderr != nil {
		errOut = stderr
	}
	getenv := func(k string) string {
		return map[string]string{"TURNSTILE_DSN": dsn, "TURNSTILE_STATE_KEYS": spec}[k]
	}
	err := run(ctx, append([]string{"state", "reseal"}, args...), getenv, strings.NewReader(""), &out, errOut)
	return out.String(), errOut.String(), err
}

// cancelWriter collects what is written to it and, when cancel is set,
// calls it at the first line that starts with prefix.
type cancelWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	prefix string
	cancel func()
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil && bytes.HasPrefix(p, []byte(w.prefix)) {
		w.cancel()
		w.cancel = nil
	}
	return w.buf.Write(p)
}

func (w *cancelWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// sealedValues returns every non-empty value of every sealed column, by
// "table.column run key".
func sealedValues(t *testing.T, w *testrig.World) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, c := range sealedColumns {
		var rows []struct {
			Run   int64  `db:"run"`
			Key   string `db:"k"`
			Value []byte `db:"v"`
		}
		key := map[string]string{"runs": "''", "run_messages": "idx", "run_events": "seq", "decisions": "id", "webhook_deliveries": "id"}[c.table]
		q := fmt.Sprintf("SELECT `%s` AS run, %s AS k, `%s` AS v FROM `%s` WHERE `%s` IS NOT NULL AND LENGTH(`%s`) > 0",
			c.run, key, c.column, c.table, c.column, c.column)
		if err := w.DB.Select(&rows, q); err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			out[fmt.Sprintf("%s.%s run %d %s", c.table, c.column, r.Run, r.Key)] = r.Value
		}
	}
	return out
}

// rewriteRun replaces every sealed value of a run with what f makes of it.
func rewriteRun(t *testing.T, w *testrig.World, runID int64, f func([]byte) []byte) {
	t.Helper()
	for _, c := range sealedColumns {
		var vals [][]byte
		q := fmt.Sprintf("SELECT `%s` FROM `%s` WHERE `%s` = ? AND `%s` IS NOT NULL AND LENGTH(`%s`) > 0", c.column, c.table, c.run, c.column, c.column)
		if err := w.DB.Select(&vals, q, runID); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			u := fmt.Sprintf("UPDATE `%s` SET `%s` = ? WHERE `%s` = ? AND `%s` = ?", c.table, c.column, c.run, c.column)
			if _, err := w.DB.Exec(u, f(v), runID, v); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestStateReseal: over a database holding runs stored plain (before keys
// were set), runs sealed as older versions did (tse1, bound to nothing)
// and runs sealed under an older key, state reseal leaves every value
// sealed under the first key and bound to its place — a process that
// holds only that key reads every run and finishes the waiting ones. An
// interrupted reseal run again finishes the job; one more changes
// nothing. Without keys it refuses, and it leaves what it cannot open
// (under a key it lacks) as it is, and says so.
func TestStateReseal(t *testing.T) {
	w := testrig.New(t, testrig.Configs(resealYAML),
		testrig.Orders(builtin.Order{ID: "RS-", Customer: "Test", AmountCents: 700, Currency: "EUR"}))
	ctx := context.Background()
	ringB, err := seal.Parse(keyEntry("B", resealKeyB))
	if err != nil {
		t.Fatal(err)
	}
	plainEng := w.NewEngine(runtime.Options{})
	oldKeyEng := w.NewEngine(runtime.Options{Sealer: ringB})

	type made struct {
		id     int64
		digest string
		order  string
		prompt string
		done   bool
	}
	var runs []made
	start := func(eng *runtime.Engine, finish bool) made {
		t.Helper()
		out, order := w.Start(t, testrig.Launch{Configuration: "reseal", Engine: eng})
		if out.Status != runtime.StatusWaitingForApproval {
			t.Fatalf("run %d is %s (%v), want it waiting", out.RunID, out.Status, out.Err)
		}
		m := made{id: out.RunID, digest: out.Digest, order: order, prompt: "Please refund " + order}
		if finish {
			c, err := eng.Decide(ctx, runtime.DecideRequest{RunID: out.RunID, Digest: out.Digest, Decision: runtime.DecisionApprove,
				Reason: "approved for RESEAL", Actor: w.Actor("approver"), Path: runtime.PathRequest})
			if err != nil {
				t.Fatal(err)
			}
			if o := c.Run(ctx, nil); o.Status != runtime.StatusCompleted {
				t.Fatalf("run %d: %s (%v), want completed", o.RunID, o.Status, o.Err)
			}
			m.done = true
		}
		runs = append(runs, m)
		return m
	}
	for _, finish := range []bool{false, true} {
		start(plainEng, finish)
		start(oldKeyEng, finish)
		v1 := start(plainEng, finish)
		rewriteRun(t, w, v1.id, func(v []byte) []byte { return sealV1(t, "A", resealKeyA, v) })
	}
	before := sealedValues(t, w)
	if len(before) < 40 {
		t.Fatalf("only %d sealed values to reseal: %v", len(before), before)
	}
	spec := keyEntry("A", resealKeyA) + "," + keyEntry("B", resealKeyB)

	// Without keys there is nothing to seal with.
	if _, _, err := reseal(ctx, t, w.DSN, "", nil); err == nil || !strings.Contains(err.Error(), "TURNSTILE_STATE_KEYS") {
		t.Errorf("reseal without keys = %v, want a refusal naming TURNSTILE_STATE_KEYS", err)
	}

	// Interrupted after its first batch.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	progress := &cancelWriter{prefix: "reseal: runs:", cancel: cancel}
	_, _, err = reseal(cctx, t, w.DSN, spec, progress, "--batch", "2")
	if err == nil {
		t.Fatalf("an interrupted reseal succeeded; stderr:\n%s", progress.String())
	}
	bound := func(vals map[string][]byte) (n int, unbound []string) {
		for k, v := range vals {
			if bytes.HasPrefix(v, []byte("tse2:A:")) {
				n++
			} else {
				unbound = append(unbound, fmt.Sprintf("%s: %q", k, v[:min(len(v), 12)]))
			}
		}
		return n, unbound
	}
	if n, _ := bound(sealedValues(t, w)); n == 0 || n == len(before) {
		t.Errorf("after an interruption %d of %d values are sealed under A; want some, not all", n, len(before))
	}

	// Run again: it finishes.
	stdout, stderr, err := reseal(ctx, t, w.DSN, spec, nil, "--batch", "2")
	if err != nil {
		t.Fatalf("reseal: %v\n%s", err, stderr)
	}
	after := sealedValues(t, w)
	if n, unbound := bound(after); n != len(before) || len(after) != len(before) {
		t.Errorf("after reseal %d of %d values are sealed under A (%d values now); not: %s", n, len(before), len(after), strings.Join(unbound, "; "))
	}
	for _, table := range []string{"runs", "run_messages", "run_events", "decisions", "webhook_deliveries"} {
		if !strings.Contains(stderr, "reseal: "+table+":") {
			t.Errorf("stderr shows no progress of %s:\n%s", table, stderr)
		}
	}
	if !strings.Contains(stdout, "changed") {
		t.Errorf("stdout = %q, want a summary of what changed", stdout)
	}

	// Once more: nothing to do.
	stdout, stderr, err = reseal(ctx, t, w.DSN, spec, nil)
	if err != nil {
		t.Fatalf("reseal again: %v\n%s", err, stderr)
	}
	if again := sealedValues(t, w); fmt.Sprint(again) != fmt.Sprint(after) {
		t.Errorf("a second reseal changed values")
	}
	if !strings.Contains(stdout, " 0 values changed") {
		t.Errorf("second reseal stdout = %q, want 0 values changed", stdout)
	}

	// Under A alone every run reads as it was written, and the waiting ones
	// are decided and finish.
	ringA, err := seal.Parse(keyEntry("A", resealKeyA))
	if err != nil {
		t.Fatal(err)
	}
	onlyA := w.NewEngine(runtime.Options{Sealer: ringA})
	for _, m := range runs {
		run, _, err := onlyA.Visible(ctx, m.id, w.Actor("owner"))
		if err != nil {
			t.Fatal(err)
		}
		wantAnswer := ""
		if m.done {
			wantAnswer = "Refunded."
		}
		if run.Prompt != m.prompt || run.Answer != wantAnswer {
			t.Errorf("run %d under A alone: prompt %q, answer %q; want %q, %q", m.id, run.Prompt, run.Answer, m.prompt, wantAnswer)
		}
		evs, err := onlyA.Events(ctx, m.id, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if bytes.Contains(e.Payload, []byte("unreadable")) {
				t.Errorf("run %d event %d under A alone: %s", m.id, e.Seq, e.Payload)
			}
		}
		if m.done {
			continue
		}
		c, err := onlyA.Decide(ctx, runtime.DecideRequest{RunID: m.id, Digest: m.digest, Decision: runtime.DecisionApprove,
			Actor: w.Actor("approver"), Path: runtime.PathRequest})
		if err != nil {
			t.Fatalf("decide run %d under A alone: %v", m.id, err)
		}
		if o := c.Run(ctx, nil); o.Status != runtime.StatusCompleted || w.Refunds(t, m.order) != 1 {
			t.Errorf("run %d under A alone: %s (%v), %d refunds; want completed, refunded once", m.id, o.Status, o.Err, w.Refunds(t, m.order))
		}
	}

	// A value sealed under a key reseal is not given is left as it is,
	// and the command says so.
	lost := runs[0].id
	sealedC := sealV1(t, "C", resealKeyC, []byte("under C"))
	if _, err := w.DB.Exec(`UPDATE runs SET answer = ? WHERE id = ?`, sealedC, lost); err != nil {
		t.Fatal(err)
	}
	snapshot := sealedValues(t, w)
	_, _, err = reseal(ctx, t, w.DSN, spec, nil)
	if err == nil || !strings.Contains(err.Error(), `"C"`) {
		t.Errorf("reseal with a value under a missing key = %v, want an error naming key C", err)
	}
	if got := sealedValues(t, w); fmt.Sprint(got) != fmt.Sprint(snapshot) {
		t.Errorf("reseal changed values while one was under a missing key")
	}
}

// TestStateFormat: TURNSTILE_STATE_FORMAT=1 (the previous version's
// format, for a rolling upgrade) keeps state reseal from binding anything,
// and a value that names no format is refused before anything runs.
func TestStateFormat(t *testing.T) {
	_, dsn := dbtest.New(t)
	spec := keyEntry("A", resealKeyA)
	for format, want := range map[string]string{
		"1": "TURNSTILE_STATE_FORMAT=1 seals content unbound",
		"3": `TURNSTILE_STATE_FORMAT must be 1 (the previous version's format, for a rolling upgrade) or 2 (the default), not "3"`,
	} {
		getenv := func(k string) string {
			return map[string]string{"TURNSTILE_DSN": dsn, "TURNSTILE_STATE_KEYS": spec, "TURNSTILE_STATE_FORMAT": format}[k]
		}
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"state", "reseal"}, getenv, strings.NewReader(""), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("state reseal with TURNSTILE_STATE_FORMAT=%s: %v, want an error saying %q", format, err, want)
		}
		if strings.Contains(out.String(), "done") || strings.Contains(errOut.String(), "done") {
			t.Errorf("state reseal with TURNSTILE_STATE_FORMAT=%s went through: %s%s", format, out.String(), errOut.String())
		}
	}
}
