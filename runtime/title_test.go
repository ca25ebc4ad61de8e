package runtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

const (
	titledYAML = `
identifier: titled
title: generate
provider:
  type: scripted
  script:
    title: "\"Refunding an order.\""
    rounds:
      - text: "Done."
tools: []
`
	untitledYAML = `
identifier: untitled
title: generate
provider:
  type: scripted
  script:
    rounds:
      - text: "Done."
tools: []
`
)

// waitTitle waits until the run's title, as its owner reads it, is want.
func waitTitle(t *testing.T, f *fixture, id int64, want string) {
	t.Helper()
	var got string
	if !testrig.Eventually(5*time.Second, func() bool {
		r, _, err := f.Engine.Visible(context.Background(), id, f.owner)
		if err != nil {
			t.Fatal(err)
		}
		got = r.Title
		return got == want
	}) {
		t.Fatalf("run %d's title = %q, want %q", id, got, want)
	}
}

// A run's title is its prompt's first line; with title: generate the
// scripted model's title replaces it once turn 1 completed, cleaned; a
// title round that fails keeps the cut one; a later turn asks no more.
func TestTitles(t *testing.T) {
	f := newFixture(t, 0, titledYAML, untitledYAML)
	out, _ := f.Start(t, testrig.Launch{Configuration: "titled", Prompt: "Please refund %s\nIt arrived broken."})
	waitTitle(t, f, out.RunID, "Refunding an order")
	if r := f.Run(t, out.RunID); r.TitleSource != runtime.TitleGenerated {
		t.Errorf("title source = %q, want generated", r.TitleSource)
	}

	failed, order := f.Start(t, testrig.Launch{Configuration: "untitled", Prompt: "Please refund %s\nIt arrived broken."})
	waitTitle(t, f, failed.RunID, "Please refund "+order)

	// The owner's title stands: a follow-up's turn asks for none.
	if err := f.Engine.SetTitle(context.Background(), out.RunID, f.owner, "  My refund  "); err != nil {
		t.Fatal(err)
	}
	f.followUp(t, out.RunID, f.owner, "and another one")
	waitTitle(t, f, out.RunID, "My refund")
	for name, tc := range map[string]struct {
		actor runtime.Actor
		title string
		code  runtime.Code
	}{
		"a stranger":     {f.other, "mine", runtime.CodeNotFound},
		"an approver":    {f.approver, "mine", runtime.CodeNotFound},
		"an empty title": {f.owner, " ", runtime.CodeInvalidRequest},
		"a control char": {f.owner, "a\x07b", runtime.CodeInvalidRequest},
		"121 characters": {f.owner, strings.Repeat("x", 121), runtime.CodeInvalidRequest},
	} {
		if err := f.Engine.SetTitle(context.Background(), out.RunID, tc.actor, tc.title); runtime.CodeOf(err) != tc.code {
			t.Errorf("%s: %v, want %s", name, err, tc.code)
		}
	}
	waitTitle(t, f, out.RunID, "My refund")
}
