// Package all combines the providers Turnstile ships, so that the engine
// gets one factory for every provider type a configuration may name.
package all

import (
	"errors"
	"fmt"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/provider/openai"
	"github.com/turnstile-dev/turnstile/runtime/provider/scripted"
)

// Factory builds the provider a configuration names, by its provider type:
// scripted or openai. An unknown type is an error naming it; the chosen
// factory's errors come back as they are.
func Factory(cfg *runtime.Configuration) (runtime.Provider, error) {
	if cfg == nil {
		return nil, errors.New("provider: no configuration")
	}
	switch cfg.Provider.Type {
	case scripted.TypeScripted:
		return scripted.Factory(cfg)
	case openai.TypeOpenAI:
		return openai.Factory(cfg)
	default:
		return nil, fmt.Errorf("provider: configuration %s: unknown provider type %q (want %s or %s)",
			cfg.Identifier, cfg.Provider.Type, scripted.TypeScripted, openai.TypeOpenAI)
	}
}

var _ runtime.ProviderFactory = Factory
