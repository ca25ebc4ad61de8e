package runtime_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/seal"
)

// conversationYAML is a turn with a tool call: the scripted model plays it
// again for every turn's message, so each turn stores the message, a round
// that calls noop, its result and an answer. privacy_level full (the
// default) keeps the events' content, as a configuration that shows its
// steps would.
const conversationYAML = `
identifier: conversation
max_iterations: 3
tools: [noop]
provider:
  type: scripted
  script:
    rounds:
      - text: "Let me look that up."
        tool_calls: [{name: noop, arguments: {order: "ORD-1002"}}]
      - text: "ORD-1002 was shipped on Monday and should arrive by Thursday."
`

// conversationTurns is the length of the conversation measured.
const conversationTurns = 20

// BenchmarkConversationStorage builds conversations of 20 turns through
// the engine (each turn: a message, a model round with a tool call, the
// tool's result, an answer) and reports what they store, per turn, and
// what a follow-up reads to start its turn 21.
//
// What is counted: the bytes of the rows' column values, not InnoDB's
// pages, row headers, indexes or undo. Variable-width columns (VARCHAR,
// TEXT, BLOB: the content) count their LENGTH(), NULL as 0; fixed-width
// ones their storage size (BIGINT 8, INT 4, TINYINT 1, DATETIME(6) 8).
// Metrics, each per turn of a 20-turn run:
//
//   - messages-B/turn: run_messages rows;
//   - events-B/turn: run_events rows;
//   - runs-row-B/turn: how much the runs row grew from turn 1 to turn 20,
//     over the 19 turns between (it holds the checkpoint, not the
//     transcript, so this should stay near 0);
//   - stored-B/turn: all three together, the runs row whole;
//   - read-B-at-turn-21: what SendMessage reads before turn 21 can start —
//     the runs row (with its checkpoint) and every run_messages body of
//     the transcript.
//
// plain is without state keys; sealed with a key, so every content column
// is AES-GCM sealed (runtime/seal).
func BenchmarkConversationStorage(b *testing.B) {
	key := make([]byte, 32)
	rand.Read(key)
	keys, err := seal.Parse("bench:" + base64.StdEncoding.EncodeToString(key))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		sealer runtime.Sealer
	}{{"plain", nil}, {"sealed", keys}} {
		b.Run(bc.name, func(b *testing.B) {
			f := newFixture(b, 0, conversationYAML)
			eng := f.NewEngine(runtime.Options{Sealer: bc.sealer})
			ctx := context.Background()
			var last sizes
			for b.Loop() {
				last = conversation(b, ctx, f, eng)
			}
			turns := float64(conversationTurns)
			b.ReportMetric(float64(last.messages)/turns, "messages-B/turn")
			b.ReportMetric(float64(last.events)/turns, "events-B/turn")
			b.ReportMetric(float64(last.runRow-last.runRowTurn1)/(turns-1), "runs-row-B/turn")
			b.ReportMetric(float64(last.messages+last.events+last.runRow)/turns, "stored-B/turn")
			b.ReportMetric(float64(last.read), "read-B-at-turn-21")
		})
	}
}

// sizes are the column bytes of one run's rows.
type sizes struct {
	messages, events, runRow, runRowTurn1 int64
	read                                  int64 // the runs row and the messages' bodies
}

// conversation runs one 20-turn conversation and measures its rows.
func conversation(b *testing.B, ctx context.Context, f *fixture, eng *runtime.Engine) sizes {
	b.Helper()
	c, err := eng.Start(ctx, runtime.StartRequest{Configuration: "conversation",
		Prompt: "Where is my order ORD-1002? It has been a week.", Owner: f.owner})
	if err != nil {
		b.Fatal(err)
	}
	out := c.Run(ctx, nil)
	if out.Status != runtime.StatusCompleted {
		b.Fatalf("turn 1: %+v", out)
	}
	id := out.RunID
	var s sizes
	s.runRowTurn1 = rowBytes(b, f.DB, "runs", "id = ?", id)
	for turn := 2; turn <= conversationTurns; turn++ {
		c, err := eng.SendMessage(ctx, runtime.MessageRequest{RunID: id, Actor: f.owner,
			Content: fmt.Sprintf("Thanks. Turn %d: and where is it now, please?", turn)})
		if err != nil {
			b.Fatalf("turn %d: %v", turn, err)
		}
		if out := c.Run(ctx, nil); out.Status != runtime.StatusCompleted {
			b.Fatalf("turn %d: %+v", turn, out)
		}
	}
	s.messages = rowBytes(b, f.DB, "run_messages", "run_id = ?", id)
	s.events = rowBytes(b, f.DB, "run_events", "run_id = ?", id)
	s.runRow = rowBytes(b, f.DB, "runs", "id = ?", id)
	var bodies int64
	if err := f.DB.Get(&bodies, `SELECT COALESCE(SUM(LENGTH(body)), 0) FROM run_messages WHERE run_id = ?`, id); err != nil {
		b.Fatal(err)
	}
	s.read = s.runRow + bodies
	return s
}

// fixedWidth is the storage size of the fixed-width column types.
var fixedWidth = map[string]int{"bigint": 8, "int": 4, "smallint": 2, "tinyint": 1, "datetime": 8, "timestamp": 7, "date": 3, "double": 8}

// rowBytes sums the column bytes (see BenchmarkConversationStorage) of
// the rows of table where where holds.
func rowBytes(b *testing.B, db *sqlx.DB, table, where string, args ...any) int64 {
	b.Helper()
	var cols []struct {
		Name string `db:"COLUMN_NAME"`
		Type string `db:"DATA_TYPE"`
	}
	if err := db.Select(&cols, `SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, table); err != nil {
		b.Fatal(err)
	}
	var terms []string
	for _, c := range cols {
		if w, ok := fixedWidth[c.Type]; ok {
			terms = append(terms, fmt.Sprint(w))
			continue
		}
		terms = append(terms, fmt.Sprintf("COALESCE(LENGTH(`%s`), 0)", c.Name))
	}
	var n int64
	q := fmt.Sprintf("SELECT COALESCE(SUM(%s), 0) FROM `%s` WHERE %s", strings.Join(terms, " + "), table, where)
	if err := db.Get(&n, q, args...); err != nil {
		b.Fatal(err)
	}
	return n
}
