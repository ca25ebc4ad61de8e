package web

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/turnstile-dev/turnstile/runtime"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r    io.Reader
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	return n, err
}

// emptyBulk is a POST /api/decisions body of n empty entries:
// {"decisions":[{},{},…]}.
func emptyBulk(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"decisions":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("{}")
	}
	b.WriteString("]}")
	return b.Bytes()
}

// emptyBulkMiB is the most empty entries a body of maxAPIBytes holds:
// 349,520 of them.
var emptyBulkMiB = (maxAPIBytes - len(`{"decisions":[]}`) + 1) / len(`{},`)

// decodeBulk reads a bulk body as POST /api/decisions does, then checks
// it, and says how much of the body it read.
func decodeBulk(body []byte) (read int, err error) {
	cr := &countingReader{r: bytes.NewReader(body)}
	var got bulkBody
	err = decodeJSON(&untouched{}, httptest.NewRequest(http.MethodPost, "/api/decisions", cr), &got)
	if err == nil {
		_, err = apiBulkRequests(got, runtime.Actor{ID: 1})
	}
	return cr.read, err
}

// TestBulkBodyStopsAtItsLimit: a bulk of 1 MiB of empty entries is
// refused as invalid_bulk at its entry 501, having read a small part of
// the body; the same for whatever the body holds after that entry, even
// bytes that are not UTF-8 or not JSON at all.
func TestBulkBodyStopsAtItsLimit(t *testing.T) {
	tests := []struct {
		name string
		body []byte
	}{
		{"1 MiB of empty entries", emptyBulk(emptyBulkMiB)},
		{"501 entries, then not UTF-8", append(bytes.TrimSuffix(emptyBulk(runtime.MaxBulk+1), []byte("]}")),
			[]byte(`,{"reason":"`+strings.Repeat("\xff", 4096)+`"}]}`)...)},
		{"501 entries, then no JSON", append(bytes.TrimSuffix(emptyBulk(runtime.MaxBulk+1), []byte("]}")),
			[]byte(strings.Repeat("]", 64<<10))...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read, err := decodeBulk(tt.body)
			var ref *runtime.Refusal
			if !errors.As(err, &ref) || ref.Code != codeInvalidBulk {
				t.Fatalf("refusal %v, want invalid_bulk", err)
			}
			if !strings.Contains(ref.Message, "at most 500") || !strings.Contains(ref.Message, "501") {
				t.Errorf("message %q, want it to name the limit (at most 500) and the entry it stopped at (501)", ref.Message)
			}
			// 501 entries take 1,517 bytes: the decoder reads ahead a
			// little, never the rest.
			if read > 16<<10 {
				t.Errorf("read %d of the body's %d bytes, want at most 16 KiB: the decoder went on past entry 501", read, len(tt.body))
			}
		})
	}
}

// BenchmarkBadBulk is the cost of refusing the largest bulk a body can
// hold: 1 MiB of empty entries, 349,520 of them.
func BenchmarkBadBulk(b *testing.B) {
	body := emptyBulk(emptyBulkMiB)
	if len(body) > maxAPIBytes {
		b.Fatalf("the body is %d bytes, over the limit", len(body))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeBulk(body); runtime.CodeOf(err) != codeInvalidBulk {
			b.Fatalf("refusal %v, want invalid_bulk", err)
		}
	}
}

// BenchmarkFullBulk is the cost of reading the largest bulk a route takes:
// 500 entries, each with its digest and a reason.
func BenchmarkFullBulk(b *testing.B) {
	entries := make([]string, runtime.MaxBulk)
	for i := range entries {
		entries[i] = `{"run_id":` + strconv.Itoa(i+1) + `,"turn_digest":"` + strings.Repeat("ab", 32) +
			`","decision":"approve","scope":"once","reason":"all of them"}`
	}
	body := []byte(`{"decisions":[` + strings.Join(entries, ",") + `]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeBulk(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeBodyLimitsAndBytes: the limits every body has, a
// json.RawMessage kept as sent, and UTF-8 checked across reads of one
// byte each, a rune split between them included.
func TestDecodeBodyLimitsAndBytes(t *testing.T) {
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	many := "[" + strings.Repeat("0,", defaultLimits.values-3) + "0]" // the body's object, input, and its entries
	tests := []struct {
		name        string
		body        string
		wantErr     string // part of the refusal's message; "" for none
		wantInput   string
		wantReason  string
		oneByteRead bool
	}{
		{name: "raw kept as sent", body: `{"input": { "b" : [1, 2], "a":"\u00e9" } }`, wantInput: `{ "b" : [1, 2], "a":"\u00e9" }`},
		{name: "raw null", body: `{"input":null}`, wantInput: `null`},
		// As runtime.DecodeStrict counts: the innermost array sits in the
		// body's object and the arrays around it.
		{name: "an array inside 64 arrays and objects", body: `{"input":` + nested(64) + `}`, wantInput: nested(64)},
		{name: "inside 65", body: `{"input":` + nested(65) + `}`, wantErr: "nests deeper than 64 levels"},
		{name: "a key twice inside raw", body: `{"input":{"a":{"b":1,"b":2}}}`, wantErr: "input.a.b is given twice"},
		{name: "as many values as a body takes", body: `{"input":` + many + `}`, wantInput: many},
		{name: "one value more", body: `{"input":[0,` + many[1:] + `}`, wantErr: "more than 10000 values"},
		{name: "runes one byte at a time", body: `{"turn_digest":"é€😀"}`, wantReason: "é€😀", oneByteRead: true},
		{name: "a rune cut by the end", body: "{\"turn_digest\":\"\xe2\x82", wantErr: "not valid UTF-8", oneByteRead: true},
		{name: "a byte that starts no rune", body: "{\"turn_digest\":\"a\x80\"}", wantErr: "not valid UTF-8", oneByteRead: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tt.body)
			if tt.oneByteRead {
				body = iotest.OneByteReader(body)
			}
			var got inputBody
			err := decodeJSON(&untouched{}, httptest.NewRequest(http.MethodPost, "/api/runs/1/input", body), &got)
			if tt.wantErr != "" {
				var ref *runtime.Refusal
				if !errors.As(err, &ref) || ref.Code != runtime.CodeInvalidRequest || !strings.Contains(ref.Message, tt.wantErr) {
					t.Fatalf("refusal %v, want invalid_request saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if string(got.Input) != tt.wantInput || got.TurnDigest != tt.wantReason {
				t.Errorf("input %s, turn_digest %q; want %s and %q", got.Input, got.TurnDigest, tt.wantInput, tt.wantReason)
			}
		})
	}
}
