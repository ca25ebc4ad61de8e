package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestLinesNameTheirTurn: a stream of a turn writes the turn into every
// line, last, the live text lines included; a stream of no turn (the event
// stream, whose lines name their own) adds nothing.
func TestLinesNameTheirTurn(t *testing.T) {
	for _, tc := range []struct {
		turn int
		line any
		want string
	}{
		{2, textLine{Type: lineDelta, Text: "Refunding <b>ORD-17</b>"}, `{"type":"delta","text":"Refunding \u003cb\u003eORD-17\u003c/b\u003e","turn":2}`},
		{1, textLine{Type: lineThinking, Text: ""}, `{"type":"thinking","text":"","turn":1}`},
		{3, typeLine{Type: lineKeepalive}, `{"type":"keepalive","turn":3}`},
		{0, typeLine{Type: lineKeepalive}, `{"type":"keepalive"}`},
	} {
		rec := httptest.NewRecorder()
		st := &stream{w: rec, rc: http.NewResponseController(rec), writeTimeout: time.Second}
		st.setTurn(tc.turn)
		st.send(lineKeepalive, tc.line)
		if got := rec.Body.String(); got != tc.want+"\n" {
			t.Errorf("line of turn %d = %q, want %q", tc.turn, got, tc.want)
		}
	}
}
