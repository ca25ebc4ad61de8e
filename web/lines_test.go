package web

import (
	"encoding/json"
	"testing"
)

// TestTextLines: the live text lines, as readers of a run will get them.
func TestTextLines(t *testing.T) {
	for _, tc := range []struct {
		line textLine
		want string
	}{
		{textLine{Type: lineDelta, Turn: 2, Text: "Refunding <b>ORD-17</b>"}, `{"type":"delta","turn":2,"text":"Refunding \u003cb\u003eORD-17\u003c/b\u003e"}`},
		{textLine{Type: lineThinking, Turn: 1, Text: ""}, `{"type":"thinking","turn":1,"text":""}`},
	} {
		b, err := json.Marshal(tc.line)
		if err != nil || string(b) != tc.want {
			t.Errorf("%s line = %s, %v; want %s", tc.line.Type, b, err, tc.want)
		}
	}
}
