package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store"
	"github.com/turnstile-dev/turnstile/store/dbtest"
)

func agentConfig(t *testing.T, prompt string) *runtime.Configuration {
	t.Helper()
	c := &runtime.Configuration{Identifier: "versioned", Name: "Versioned", Active: true,
		Description: "Counts its versions.", SystemPrompt: prompt, Tools: []string{},
		Provider: runtime.ProviderSpec{Type: "scripted"}}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	return c
}

// The version grows with each different definition, byte for byte (a
// change of case too),
// and neither the same definition again nor switching off changes it.
func TestAgentVersions(t *testing.T) {
	db, _ := dbtest.New(t)
	s := store.New(db)
	ctx := context.Background()
	version := func() int {
		t.Helper()
		a, err := s.Agent(ctx, "versioned")
		if err != nil {
			t.Fatal(err)
		}
		return a.Version
	}
	steps := []struct {
		what   string
		prompt string
		want   int
	}{
		{"created", "Be brief.", 1},
		{"the same again", "Be brief.", 1},
		{"another prompt", "Be very brief.", 2},
		{"only its case changed", "BE VERY BRIEF.", 3},
	}
	for _, st := range steps {
		if err := s.SaveConfiguration(ctx, agentConfig(t, st.prompt)); err != nil {
			t.Fatal(err)
		}
		if got := version(); got != st.want {
			t.Errorf("%s: version %d, want %d", st.what, got, st.want)
		}
	}
	list, err := s.ActiveAgents(ctx)
	if err != nil || len(list) != 1 || list[0].Configuration.Description != "Counts its versions." || list[0].Version != 3 {
		t.Fatalf("ActiveAgents = %+v, %v; want versioned at version 3 with its description", list, err)
	}
	for range 2 { // switching off twice is no error
		if err := s.DeactivateAgent(ctx, "versioned"); err != nil {
			t.Fatal(err)
		}
	}
	if got := version(); got != 3 {
		t.Errorf("after DeactivateAgent: version %d, want 3", got)
	}
	if list, err := s.ActiveAgents(ctx); err != nil || len(list) != 0 {
		t.Errorf("ActiveAgents after DeactivateAgent = %+v, %v; want none", list, err)
	}
	if err := s.DeactivateAgent(ctx, "nothing-here"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("DeactivateAgent of an unknown identifier = %v, want ErrNotFound", err)
	}
	if _, err := s.Agent(ctx, "nothing-here"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("Agent of an unknown identifier = %v, want ErrNotFound", err)
	}
}
