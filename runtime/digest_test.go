package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"testing"
)

// refundTurn is a pending turn like the demo's refund pause; each test
// changes one thing of it.
func refundTurn() PendingTurn {
	return PendingTurn{
		Kind: TurnApproval,
		Calls: []ToolCall{
			{ID: "call_1", Name: "refund_order", Arguments: json.RawMessage(`{"order_id":"ORD-1001","amount":12.5}`)},
			{ID: "call_2", Name: "lookup_order", Arguments: json.RawMessage(`{"order_id":"ORD-1001"}`)},
		},
	}
}

func mustDigest(t *testing.T, turn PendingTurn) string {
	t.Helper()
	d, err := Digest(turn)
	if err != nil {
		t.Fatalf("Digest(%+v): %v", turn, err)
	}
	return d
}

func TestDigestIsStableAndHex(t *testing.T) {
	first := mustDigest(t, refundTurn())
	if again := mustDigest(t, refundTurn()); again != first {
		t.Errorf("digest of the same turn = %s, then %s; want equal", first, again)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(first) {
		t.Errorf("digest = %q, want 64 lower-case hex characters", first)
	}
}

// TestDigestIsSHA256OfCanonicalJSON pins the format: a digest stored with a
// run must still match after a rebuild, so the hashed bytes may not drift.
func TestDigestIsSHA256OfCanonicalJSON(t *testing.T) {
	turn := PendingTurn{Kind: TurnApproval, Calls: []ToolCall{
		{ID: "c1", Name: "refund_order", Arguments: json.RawMessage(`{ "reason": "broken", "order_id": "ORD-1" }`)},
	}}
	canon := `{"calls":[{"arguments":{"order_id":"ORD-1","reason":"broken"},"id":"c1","name":"refund_order"}],"kind":"approval"}`
	sum := sha256.Sum256([]byte(canon))
	want := hex.EncodeToString(sum[:])
	if got := mustDigest(t, turn); got != want {
		t.Errorf("Digest = %s, want sha256(%s) = %s", got, canon, want)
	}
}

func TestDigestChangesWithTheTurn(t *testing.T) {
	base := mustDigest(t, refundTurn())
	tests := []struct {
		name string
		edit func(*PendingTurn)
	}{
		{"kind", func(p *PendingTurn) { p.Kind = TurnInput }},
		{"call id", func(p *PendingTurn) { p.Calls[0].ID = "call_9" }},
		{"call name", func(p *PendingTurn) { p.Calls[0].Name = "refund_order_v2" }},
		{"argument value", func(p *PendingTurn) {
			p.Calls[0].Arguments = json.RawMessage(`{"order_id":"ORD-1002","amount":12.5}`)
		}},
		{"argument number", func(p *PendingTurn) {
			p.Calls[0].Arguments = json.RawMessage(`{"order_id":"ORD-1001","amount":12.51}`)
		}},
		{"argument added", func(p *PendingTurn) {
			p.Calls[0].Arguments = json.RawMessage(`{"order_id":"ORD-1001","amount":12.5,"full":true}`)
		}},
		{"call order", func(p *PendingTurn) { p.Calls[0], p.Calls[1] = p.Calls[1], p.Calls[0] }},
		{"call dropped", func(p *PendingTurn) { p.Calls = p.Calls[:1] }},
		{"schema", func(p *PendingTurn) { p.Schema = json.RawMessage(`{"type":"object"}`) }},
		{"note", func(p *PendingTurn) { p.Note = "the previous attempt was interrupted; its effect is unknown" }},
		{"attempt", func(p *PendingTurn) { p.Attempt = 1 }},
	}
	seen := map[string]string{base: "base"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turn := refundTurn()
			tt.edit(&turn)
			got := mustDigest(t, turn)
			if other, ok := seen[got]; ok {
				t.Errorf("digest after changing the %s = %s, the same as for %s", tt.name, got, other)
			}
			seen[got] = tt.name
		})
	}
}

func TestDigestChangesWithTheSchema(t *testing.T) {
	turn := PendingTurn{Kind: TurnInput, Calls: []ToolCall{{ID: "c1", Name: "ask_operator", Arguments: json.RawMessage(`{}`)}},
		Schema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}}}`)}
	before := mustDigest(t, turn)
	turn.Schema = json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"}}}`)
	if after := mustDigest(t, turn); after == before {
		t.Errorf("digest = %s before and after changing the schema, want a new one", after)
	}
}

// TestDigestIgnoresSpelling: the same question asked with its JSON spelled
// differently is the same turn, or a re-offer would look like a new one.
func TestDigestIgnoresSpelling(t *testing.T) {
	tests := []struct {
		name       string
		args, alt  string
		schema, sc string
	}{
		{name: "key order and whitespace", args: `{"a":1,"b":2}`, alt: "{ \"b\": 2,\n\t\"a\": 1 }"},
		{name: "nested key order", args: `{"x":{"p":[1,{"q":1,"r":2}],"o":null}}`, alt: `{"x":{"o":null,"p":[1,{"r":2,"q":1}]}}`},
		{name: "1.0", args: `{"n":1}`, alt: `{"n":1.0}`},
		{name: "1e0", args: `{"n":1}`, alt: `{"n":1e0}`},
		{name: "10E-1", args: `{"n":1}`, alt: `{"n":10E-1}`},
		{name: "0.50 and 5e-1", args: `{"n":0.50}`, alt: `{"n":5e-1}`},
		{name: "escaped string", args: `{"s":"é<>"}`, alt: `{"s":"\u00e9\u003c\u003e"}`},
		{name: "schema key order", args: `{}`, alt: `{}`,
			schema: `{"type":"object","required":["amount"]}`, sc: `{ "required": ["amount"], "type": "object" }`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			one := PendingTurn{Kind: TurnInput, Calls: []ToolCall{{ID: "c1", Name: "ask", Arguments: json.RawMessage(tt.args)}}}
			two := PendingTurn{Kind: TurnInput, Calls: []ToolCall{{ID: "c1", Name: "ask", Arguments: json.RawMessage(tt.alt)}}}
			if tt.schema != "" {
				one.Schema, two.Schema = json.RawMessage(tt.schema), json.RawMessage(tt.sc)
			}
			if got, want := mustDigest(t, two), mustDigest(t, one); got != want {
				t.Errorf("digest with %s = %s, with %s = %s; want equal", tt.alt, got, tt.args, want)
			}
		})
	}
}

func TestDigestRejectsInvalidArguments(t *testing.T) {
	turn := refundTurn()
	turn.Calls[0].Arguments = json.RawMessage(`{"order_id":`)
	if d, err := Digest(turn); err == nil {
		t.Errorf("Digest with truncated arguments = %s, want an error", d)
	}
}

func TestCanonical(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"scalar", `true`, `true`},
		{"null", ` null `, `null`},
		{"empty object", `{ }`, `{}`},
		{"empty array", `[ ]`, `[]`},
		{"sorted keys", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"keys sorted by bytes", `{"b":0,"B":0,"é":0,"a":0}`, `{"B":0,"a":0,"b":0,"é":0}`},
		{"nested objects sorted", `{"z":{"y":1,"x":{"w":2,"v":3}},"a":[]}`, `{"a":[],"z":{"x":{"v":3,"w":2},"y":1}}`},
		{"arrays keep their order", `[3, 1, {"b":2,"a":1}, [2, 1]]`, `[3,1,{"a":1,"b":2},[2,1]]`},
		{"whitespace dropped", " {\n\t\"a\" :\r\n [ 1 , 2 ] } ", `{"a":[1,2]}`},
		{"whitespace inside strings kept", `{"a":" x  y "}`, `{"a":" x  y "}`},
		{"integer", `42`, `42`},
		{"negative integer", `-7`, `-7`},
		{"1.0 is 1", `1.0`, `1`},
		{"1e0 is 1", `1e0`, `1`},
		{"10E-1 is 1", `10E-1`, `1`},
		{"fraction", `0.50`, `0.5`},
		{"large int64 keeps every digit", `9007199254740993`, `9007199254740993`},
		{"max int64", `9223372036854775807`, `9223372036854775807`},
		{"small float", `1.5e-7`, `1.5e-07`},
		{"large float", `1e300`, `1e+300`},
		{"1e6 is 1000000", `1e6`, `1000000`},
		{"1000000.0 is 1000000", `1000000.0`, `1000000`},
		{"-0.0 is 0", `-0.0`, `0`},
		{"-0 is 0", `-0`, `0`},
		{"unicode not escaped", `"\u00e9\u4e2d"`, `"é中"`},
		{"html not escaped", `"\u003ca href=\"x\"\u003e&amp;\u003c/a\u003e"`, `"<a href=\"x\">&amp;</a>"`},
		{"control characters escaped", `"a\u0001b\tc\nd"`, `"a\u0001b\tc\nd"`},
		{"solidus unescaped", `"a\/b"`, `"a/b"`},
		{"quote and backslash", `"\"\\"`, `"\"\\"`},
		{"duplicate key keeps the last", `{"a":1,"a":2}`, `{"a":2}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical([]byte(tt.in))
			if err != nil {
				t.Fatalf("Canonical(%s): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonical(%s) = %s, want %s", tt.in, got, tt.want)
			}
			again, err := Canonical(got)
			if err != nil {
				t.Fatalf("Canonical(%s): %v", got, err)
			}
			if !bytes.Equal(again, got) {
				t.Errorf("Canonical(Canonical(%s)) = %s, want %s", tt.in, again, got)
			}
		})
	}
}

func TestCanonicalRejects(t *testing.T) {
	tests := []struct{ name, in string }{
		{"empty", ``},
		{"only space", `   `},
		{"truncated object", `{"a":1`},
		{"truncated array", `[1,2`},
		{"bare word", `nope`},
		{"single quotes", `{'a':1}`},
		{"trailing comma", `[1,2,]`},
		{"unquoted key", `{a:1}`},
		{"two values", `1 2`},
		{"two objects", `{"a":1}{"b":2}`},
		{"trailing bracket", `1]`},
		{"trailing brace", `{"a":1}}`},
		{"trailing comma after value", `[1],`},
		{"trailing garbage", `{"a":1} x`},
		{"trailing colon", `"a":`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Canonical([]byte(tt.in)); err == nil {
				t.Errorf("Canonical(%q) = %q, want an error", tt.in, got)
			}
		})
	}
}

func FuzzCanonical(f *testing.F) {
	for _, seed := range []string{
		`{"a":1,"b":2}`,
		`{ "b": 2, "a": 1 }`,
		`[1, 1.0, 1e0, -0.0, 1.5e-7, 9007199254740993, 12345678901234567890]`,
		`{"nested":{"z":[{"y":null,"x":true}],"a":"é<>&\u2028"}}`,
		`"\ud83d\ude00 \u0000 \t"`,
		`{"order_id":"ORD-1001","amount":12.5,"items":[{"sku":"A","qty":2}]}`,
		`[]`,
		`{"a":1}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := Canonical(in)
		if err != nil {
			// A valid document may only be refused for a number float64
			// cannot hold, such as 1e400.
			if json.Valid(in) && !errors.Is(err, strconv.ErrRange) {
				t.Fatalf("Canonical(%q) refused a valid document: %v", in, err)
			}
			return
		}
		if !json.Valid(in) {
			t.Fatalf("Canonical(%q) = %q, want an error for an invalid document", in, got)
		}
		if !json.Valid(got) {
			t.Fatalf("Canonical(%q) = %q, which is not valid JSON", in, got)
		}
		again, err := Canonical(got)
		if err != nil {
			t.Fatalf("Canonical(%q) (from %q): %v", got, in, err)
		}
		if !bytes.Equal(again, got) {
			t.Fatalf("Canonical(%q) = %q, Canonical of that = %q; want idempotent", in, got, again)
		}
		wantV, gotV := decodeNumbers(t, in), decodeNumbers(t, got)
		if !sameJSON(gotV, wantV) {
			t.Fatalf("Canonical(%q) = %q, which decodes to %#v, want %#v", in, got, gotV, wantV)
		}
	})
}

// decodeNumbers decodes one JSON value keeping numbers as json.Number.
func decodeNumbers(t *testing.T, doc []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", doc, err)
	}
	return v
}

// sameJSON compares decoded values, numbers by their float64 value: that is
// the precision Canonical promises beyond int64.
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !sameJSON(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		af, aerr := strconv.ParseFloat(string(a), 64)
		bf, berr := strconv.ParseFloat(string(b), 64)
		return aerr == nil && berr == nil && af == bf
	default:
		return a == b
	}
}
