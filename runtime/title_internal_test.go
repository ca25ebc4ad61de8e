package runtime

import (
	"strings"
	"testing"
)

func TestCutTitle(t *testing.T) {
	long := strings.Repeat("word ", 30)
	for _, tc := range []struct{ prompt, want string }{
		{"Refund ORD-1001", "Refund ORD-1001"},
		{"  Refund ORD-1001 \n and tell me why", "Refund ORD-1001"},
		{"Refund\tthe   order", "Refund the order"},
		{strings.Repeat("a", 80), strings.Repeat("a", 80)},
		{strings.Repeat("a", 81), strings.Repeat("a", 79) + "…"},
		{long, strings.TrimSpace(strings.Repeat("word ", 15)) + "…"}, // cut at the last space before 80
		{strings.Repeat("é", 79) + " and more", strings.Repeat("é", 79) + "…"},
		{strings.Repeat("ü", 90), strings.Repeat("ü", 79) + "…"},
	} {
		got := CutTitle(tc.prompt)
		if got != tc.want {
			t.Errorf("CutTitle(%q) = %q, want %q", tc.prompt, got, tc.want)
		}
		if n := len([]rune(got)); n > titleCut {
			t.Errorf("CutTitle(%q) is %d characters, more than %d", tc.prompt, n, titleCut)
		}
	}
}

func TestTitleRules(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"Refunds for Ada", "Refunds for Ada", true},
		{"  padded  ", "padded", true},
		{strings.Repeat("x", 120), strings.Repeat("x", 120), true},
		{strings.Repeat("x", 121), "", false},
		{"", "", false},
		{"   ", "", false},
		{"two\nlines", "", false},
		{"a\ttab", "", false},
		{"bad \xff byte", "", false},
	} {
		got, err := checkTitle(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("checkTitle(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	for in, want := range map[string]string{
		`"Refunding ORD-1001."`:                            "Refunding ORD-1001",
		"Title: A refund\nand more":                        "A refund",
		"one two three four five six seven eight nine ten": "one two three four five six seven eight",
		"   ": "",
	} {
		if got := cleanTitle(in); got != want {
			t.Errorf("cleanTitle(%q) = %q, want %q", in, got, want)
		}
	}
}
