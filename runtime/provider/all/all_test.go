package all

import (
	"context"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/provider/openai"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
)

func TestFactory(t *testing.T) {
	t.Setenv("TEST_ALL_KEY", "sk-test-all")
	script, err := (&scripted.Script{Rounds: []scripted.Round{{Text: []string{"done"}}}}).JSON()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("scripted", func(t *testing.T) {
		p, err := Factory(&runtime.Configuration{Identifier: "demo", Provider: runtime.ProviderSpec{Type: "scripted", Script: script}})
		if err != nil {
			t.Fatalf("Factory: %v", err)
		}
		res, err := p.Round(context.Background(), runtime.RoundRequest{Round: 1}, nil)
		if err != nil || res.Text != "done" {
			t.Errorf("Round = %+v, %v; want the script's text", res, err)
		}
	})
	t.Run("openai", func(t *testing.T) {
		p, err := Factory(&runtime.Configuration{Identifier: "support", Provider: runtime.ProviderSpec{Type: "openai",
			Model: "gpt-4o-mini", APIKeyEnv: "TEST_ALL_KEY"}})
		if err != nil {
			t.Fatalf("Factory: %v", err)
		}
		if _, ok := p.(*openai.Provider); !ok {
			t.Errorf("provider is a %T, want *openai.Provider", p)
		}
	})

	errs := []struct {
		name string
		cfg  *runtime.Configuration
		want string
	}{
		{"no configuration", nil, "provider: no configuration"},
		{"unknown type", &runtime.Configuration{Identifier: "x", Provider: runtime.ProviderSpec{Type: "anthropic"}},
			`provider: configuration x: unknown provider type "anthropic" (want scripted or openai)`},
		{"no type", &runtime.Configuration{Identifier: "x"}, `provider: configuration x: unknown provider type ""`},
		{"the chosen factory's error", &runtime.Configuration{Identifier: "x", Provider: runtime.ProviderSpec{Type: "openai"}},
			"openai: configuration x: the provider needs a model"},
		{"scripted without a script", &runtime.Configuration{Identifier: "x", Provider: runtime.ProviderSpec{Type: "scripted"}},
			"scripted: configuration x: the scripted provider has no script"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Factory(tt.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Factory = %v, %v; want an error starting %q", p, err, tt.want)
			}
		})
	}
}
