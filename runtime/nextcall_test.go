package runtime

import "testing"

// TestNextCallIsTheFirstUnanswered: the in-order shortcut of nextCall
// finds what unanswered finds, for results in order, out of order, with a
// gap, all answered, and for a transcript without calls.
func TestNextCallIsTheFirstUnanswered(t *testing.T) {
	call := func(id string) ToolCall { return ToolCall{ID: id, Name: "noop"} }
	result := func(id string) Message { return Message{Role: "tool", ToolCallID: id} }
	asked := Message{Role: "assistant", ToolCalls: []ToolCall{call("a"), call("b"), call("c")}}
	for _, tt := range []struct {
		name string
		msgs []Message
		want string // "" for none
	}{
		{"none answered", []Message{{Role: "user"}, asked}, "a"},
		{"in order", []Message{{Role: "user"}, asked, result("a")}, "b"},
		{"out of order", []Message{{Role: "user"}, asked, result("b")}, "a"},
		{"a gap", []Message{{Role: "user"}, asked, result("a"), result("c")}, "b"},
		{"all answered", []Message{{Role: "user"}, asked, result("a"), result("b"), result("c")}, ""},
		{"all answered out of order", []Message{{Role: "user"}, asked, result("c"), result("a"), result("b")}, ""},
		{"an earlier round", []Message{{Role: "user"}, asked, result("a"), result("b"), result("c"),
			{Role: "assistant", ToolCalls: []ToolCall{call("d")}}}, "d"},
		{"no calls", []Message{{Role: "user"}, {Role: "assistant", Content: "done"}}, ""},
		{"nothing asked yet", []Message{{Role: "user"}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &Continuation{state: State{Messages: tt.msgs}}
			got, ok := c.nextCall()
			if ok != (tt.want != "") || got.ID != tt.want {
				t.Errorf("nextCall = %q, %v; want %q", got.ID, ok, tt.want)
			}
			slow := ""
			if calls := c.unanswered(); len(calls) > 0 {
				slow = calls[0].ID
			}
			if slow != tt.want {
				t.Errorf("unanswered()[0] = %q; the test expects %q", slow, tt.want)
			}
		})
	}
}
