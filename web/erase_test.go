package web_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/seal"
	"github.com/turnstile-dev/turnstile/store"
)

// erasableYAML keeps content in every place a run can: at the full
// privacy level its events carry it, its notifications go to the outbox,
// it asks for input, then for an approval that the test edits. The
// scripted model's texts are the configuration's, so each tag has a
// configuration of its own ("erasable-" and the tag, in lower case), and
// each run's copies are its own.
func erasableYAML(tag string) string {
	return strings.NewReplacer("TAG", tag, "IDENT", strings.ToLower(tag)).Replace(`
identifier: erasable-IDENT
name: Erasable TAG
privacy_level: full
provider:
  type: scripted
  script:
    rounds:
      - text: "MARK-ERASE-TEXT-TAG"
        tool_calls: [{name: ask_operator, arguments: {question: "MARK-ERASE-QUESTION-TAG"}}]
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}", reason: "MARK-ERASE-ARG-TAG"}}]
      - text: "MARK-ERASE-ANSWER-TAG"
tools: [ask_operator, refund_order]
notify:
  - url: https://hooks.example.com/erase
`)
}

// erasable is a run of erasableYAML taken to its end through the API,
// and the markers of every piece of its content.
type erasable struct {
	id      int64
	order   string
	markers map[string]string // by what they mark
}

// settleErasable starts a run of erasableYAML(tag) as owner, answers its input
// turn and approves its refund with edited arguments as approver, all
// with markers of tag, and returns it completed.
func settleErasable(t *testing.T, a *testApp, tag string) erasable {
	t.Helper()
	order := a.Order(t)
	e := erasable{order: order, markers: map[string]string{
		"prompt":          "MARK-ERASE-PROMPT-" + tag,
		"input":           "MARK-ERASE-INPUT-" + tag,
		"approval reason": "MARK-ERASE-REASON-" + tag,
		"edited argument": "MARK-ERASE-EDIT-" + tag,
		"model text":      "MARK-ERASE-TEXT-" + tag,
		"model question":  "MARK-ERASE-QUESTION-" + tag,
		"model argument":  "MARK-ERASE-ARG-" + tag,
		"answer":          "MARK-ERASE-ANSWER-" + tag,
	}}
	owner := a.bearer(t, "owner", runtime.ScopeRunStart)
	started := owner.call(t, a, http.MethodPost, "/api/runs",
		jsonBody(t, map[string]any{"configuration": "erasable-" + strings.ToLower(tag), "prompt": "Refund " + order + " " + e.markers["prompt"]}), nil).
		wantKeys(t, http.StatusCreated, "run")
	run := started["run"].(map[string]any)
	e.id = int64(run["id"].(float64))
	if run["status"] != string(runtime.StatusWaitingForInput) {
		t.Fatalf("run %d is %v, want it waiting for input", e.id, run["status"])
	}
	approver := a.bearer(t, "approver", runtime.ScopeRunDecide)
	answered := approver.call(t, a, http.MethodPost, runPathAPI(e.id, "/input"), jsonBody(t, map[string]any{
		"turn_digest": run["turn_digest"], "input": map[string]any{"amount": 4200, "note": e.markers["input"]}}), nil).
		wantKeys(t, http.StatusOK, "outcome")
	out := answered["outcome"].(map[string]any)
	calls, _ := out["pending_calls"].([]any)
	if out["type"] != "awaiting_approval" || len(calls) != 1 {
		t.Fatalf("run %d after its input: %v, want it waiting for one approval", e.id, out)
	}
	call := calls[0].(map[string]any)["id"].(string)
	approver.call(t, a, http.MethodPost, runPathAPI(e.id, "/decisions"), jsonBody(t, map[string]any{
		"turn_digest": out["turn_digest"], "decision": "approve", "reason": e.markers["approval reason"],
		"arguments": map[string]any{call: map[string]any{"order_id": order, "reason": e.markers["edited argument"]}}}), nil).
		wantKeys(t, http.StatusOK, "outcome")
	if got := a.Run(t, e.id).Status; got != runtime.StatusCompleted {
		t.Fatalf("run %d is %s after the approval, want it completed", e.id, got)
	}
	return e
}

// TestEraseRemovesEveryCopy is the erase's proof: two runs carry markers
// in their prompt, answer, the model's text and arguments, the input
// answered, the reasons and the edited arguments of their decisions (and
// so in the state, the transcript, the event payloads and the outbox);
// the owner erases one through the API; then every column of every table
// is searched for its markers (as bytes, and as hex), and, with state
// keys set, every sealed value opened and searched too. None of the
// erased run's is found; every one of the other run's is, so the search
// could fail. The erased run's row stays with erased_at and erased_by, its
// decisions with who decided what and when, its events' kinds; its
// delivered notification keeps its row without its body. With keys set a
// reseal of every sealed table is handed nothing of the erased run and
// finds nothing it cannot open.
func TestEraseRemovesEveryCopy(t *testing.T) {
	const goneTag, keptTag = "GONE-7f3a", "KEPT-2b9c"
	keys, err := seal.Parse("A:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xA1}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		sealer runtime.Sealer
	}{{"plain", nil}, {"sealed", keys}} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAppWith(t, 0, appEngine{configs: []string{erasableYAML(goneTag), erasableYAML(keptTag)}, sealer: tc.sealer})
			gone := settleErasable(t, a, goneTag)
			kept := settleErasable(t, a, keptTag)
			events := a.Count(t, `SELECT COUNT(*) FROM run_events WHERE run_id = ?`, gone.id)
			// One notification was delivered before the erase: its row is
			// kept, its body emptied; the pending ones are never sent.
			if _, err := a.DB.Exec(`UPDATE webhook_deliveries SET status = 'delivered', delivered_at = NOW(6)
				WHERE run_id = ? ORDER BY id LIMIT 1`, gone.id); err != nil {
				t.Fatal(err)
			}
			for _, e := range []erasable{gone, kept} {
				for what, m := range e.markers {
					if places := markerPlaces(t, a, tc.sealer, m); len(places) == 0 {
						t.Fatalf("before the erase, the %s of run %d (%q) is nowhere: the search cannot find it", what, e.id, m)
					}
				}
			}

			res := a.bearer(t, "owner", runtime.ScopeRunCancel).call(t, a, http.MethodDelete, runPathAPI(gone.id, "?erase=true"), "", nil)
			got := res.wantKeys(t, http.StatusOK, "id", "erased", "erased_at")
			if got["id"] != float64(gone.id) || got["erased"] != true {
				t.Errorf("erase answered %s", res.body)
			}

			for what, m := range gone.markers {
				if places := markerPlaces(t, a, tc.sealer, m); len(places) > 0 {
					t.Errorf("after the erase, the %s of run %d (%q) is still in %v", what, gone.id, m, places)
				}
			}
			for what, m := range kept.markers {
				if places := markerPlaces(t, a, tc.sealer, m); len(places) == 0 {
					t.Errorf("the erase of run %d took the %s of run %d (%q) too", gone.id, what, kept.id, m)
				}
			}

			var row struct {
				Status   string `db:"status"`
				ErasedBy *int64 `db:"erased_by"`
				Erased   bool   `db:"erased"`
				Prompt   []byte `db:"prompt"`
				State    []byte `db:"state"`
			}
			if err := a.DB.Get(&row, `SELECT status, erased_by, erased_at IS NOT NULL AS erased, prompt, state
				FROM runs WHERE id = ?`, gone.id); err != nil {
				t.Fatalf("the erased run's row: %v", err)
			}
			if row.Status != "completed" || !row.Erased || row.ErasedBy == nil || *row.ErasedBy != a.Users["owner"].ID ||
				len(row.Prompt) != 0 || len(row.State) != 0 {
				t.Errorf("the erased run's row = status %s, erased %v by %v, prompt %d bytes, state %d bytes; want completed, erased by the owner, empty",
					row.Status, row.Erased, row.ErasedBy, len(row.Prompt), len(row.State))
			}
			var decisions []struct {
				Kind      string `db:"kind"`
				DecidedBy int64  `db:"decided_by"`
				Decided   bool   `db:"decided"`
				Empty     bool   `db:"empty"`
			}
			if err := a.DB.Select(&decisions, `SELECT kind, decided_by, decided_at IS NOT NULL AS decided,
					reason = '' AND input IS NULL AND arguments IS NULL AS empty
				FROM decisions WHERE run_id = ? ORDER BY id`, gone.id); err != nil {
				t.Fatal(err)
			}
			if len(decisions) != 2 {
				t.Fatalf("the erased run has %d decisions, want its 2 kept", len(decisions))
			}
			for i, d := range decisions {
				if d.DecidedBy != a.Users["approver"].ID || !d.Decided || !d.Empty {
					t.Errorf("decision %d = %+v, want the approver's, with its time, and no content", i, d)
				}
			}
			if got := a.Count(t, `SELECT COUNT(*) FROM run_events WHERE run_id = ? AND payload = ''`, gone.id); got != events || events == 0 {
				t.Errorf("%d of the erased run's %d events are kept without their payload, want all", got, events)
			}
			if n := a.Count(t, `SELECT COUNT(*) FROM run_messages WHERE run_id = ?`, gone.id); n != 0 {
				t.Errorf("the erased run keeps %d transcript messages", n)
			}
			if n := a.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE run_id = ?`, gone.id); n != 1 {
				t.Errorf("the erased run keeps %d notifications, want the delivered one only", n)
			}
			if n := a.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE run_id = ? AND body = ''`, gone.id); n != 1 {
				t.Errorf("the erased run's delivered notification keeps its body")
			}

			if tc.sealer != nil {
				for _, table := range store.SealedTables() {
					var after store.ResealCursor
					for {
						b, err := a.Store.Reseal(t.Context(), table, after, 100, []byte("\x00none"), func(at runtime.Place, v []byte) ([]byte, error) {
							if at.RunID == gone.id {
								t.Errorf("reseal of %s is handed a value of the erased run %d at %v", table, gone.id, at)
							}
							_, err := tc.sealer.Open(v, at)
							return nil, err
						})
						if err != nil {
							t.Fatalf("reseal of %s after the erase: %v", table, err)
						}
						if b.Rows < 100 {
							break
						}
						after = b.Next
					}
				}
			}
		})
	}
}

// markerPlaces returns every "table.column" of the test database that
// holds marker: in any column of a text, binary or JSON type, cast to
// bytes, or in its hex; with a sealer, also in any sealed value that opens.
// The one column left out is the configurations' definition, which holds
// the scripted model's texts as the agent's own.
func markerPlaces(t *testing.T, a *testApp, sealer runtime.Sealer, marker string) []string {
	t.Helper()
	var cols []struct {
		Table  string `db:"table_name"`
		Column string `db:"column_name"`
	}
	if err := a.DB.Select(&cols, `SELECT table_name AS table_name, column_name AS column_name FROM information_schema.columns
		WHERE table_schema = DATABASE() AND data_type IN ('char', 'varchar', 'tinytext', 'text', 'mediumtext', 'longtext',
			'binary', 'varbinary', 'tinyblob', 'blob', 'mediumblob', 'longblob', 'json', 'enum', 'set')
		ORDER BY table_name, column_name`); err != nil {
		t.Fatal(err)
	}
	if len(cols) < 20 {
		t.Fatalf("information_schema lists %d text columns: not the test database's", len(cols))
	}
	var places []string
	for _, c := range cols {
		if c.Table == "configurations" && c.Column == "definition" {
			// The scripted model's words are the configuration's script:
			// the agent, which no erase of one of its runs touches. Every
			// copy of them in a run is searched.
			continue
		}
		q := fmt.Sprintf("SELECT COUNT(*) FROM `%s` WHERE INSTR(CAST(`%s` AS BINARY), CAST(? AS BINARY)) > 0 OR INSTR(HEX(`%s`), HEX(?)) > 0",
			c.Table, c.Column, c.Column)
		if a.Count(t, q, marker, marker) > 0 {
			places = append(places, c.Table+"."+c.Column)
		}
	}
	if sealer == nil {
		return places
	}
	for _, table := range store.SealedTables() {
		var after store.ResealCursor
		for {
			b, err := a.Store.Reseal(t.Context(), table, after, 100, []byte("\x00none"), func(at runtime.Place, v []byte) ([]byte, error) {
				if plain, err := sealer.Open(v, at); err == nil && strings.Contains(string(plain), marker) {
					places = append(places, fmt.Sprintf("%s (sealed, at %v)", table, at))
				}
				return nil, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if b.Rows < 100 {
				break
			}
			after = b.Next
		}
	}
	return places
}
