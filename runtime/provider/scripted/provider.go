package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TypeScripted is the ProviderSpec.Type of a scripted provider.
const TypeScripted = "scripted"

// Factory builds the provider of a configuration whose provider type is
// "scripted" from its stored script. Any other type, a missing script or a
// script that does not read is an error.
func Factory(cfg *runtime.Configuration) (runtime.Provider, error) {
	if cfg == nil {
		return nil, fmt.Errorf("scripted: no configuration")
	}
	if cfg.Provider.Type != TypeScripted {
		return nil, fmt.Errorf("scripted: configuration %s: provider type %q is not %q", cfg.Identifier, cfg.Provider.Type, TypeScripted)
	}
	if len(cfg.Provider.Script) == 0 {
		return nil, fmt.Errorf("scripted: configuration %s: the scripted provider has no script", cfg.Identifier)
	}
	s, err := FromJSON(cfg.Provider.Script)
	if err != nil {
		return nil, fmt.Errorf("scripted: configuration %s: %w", cfg.Identifier, err)
	}
	return New(s), nil
}

var _ runtime.ProviderFactory = Factory

// New returns a provider that plays s. It keeps no state between rounds, so
// one provider may serve many runs at once.
func New(s *Script) runtime.Provider { return &provider{script: s} }

type provider struct{ script *Script }

var orderID = regexp.MustCompile(`[A-Z]+-[0-9]+`)

// Round answers with round req.Round of the script (counted from 1). It
// fails when the script has fewer rounds, and with ctx's error when ctx ends
// during the round's delay or between its deltas (the pieces sent before
// stay sent, as a model's do). Every turn of a conversation plays the script
// again, with ${prompt} and ${order_id} taken from the turn's message: "now
// refund ORD-1002 too" refunds ORD-1002.
func (p *provider) Round(ctx context.Context, req runtime.RoundRequest, onDelta func(runtime.Delta)) (runtime.RoundResult, error) {
	if req.Title {
		if p.script.Title == "" {
			return runtime.RoundResult{}, fmt.Errorf("scripted: the script has no title")
		}
		return runtime.RoundResult{Text: p.script.Title, Usage: runtime.Usage{InputTokens: 1, OutputTokens: 1}}, nil
	}
	rounds := p.script.Rounds
	if req.Round < 1 || req.Round > len(rounds) {
		unit := "rounds"
		if len(rounds) == 1 {
			unit = "round"
		}
		return runtime.RoundResult{}, fmt.Errorf("scripted: round %d: the script has only %d %s", req.Round, len(rounds), unit)
	}
	r := rounds[req.Round-1]
	if r.IfDenied != nil && denied(req.Messages) {
		r = *r.IfDenied
	}
	if err := sleep(ctx, r.Delay); err != nil {
		return runtime.RoundResult{}, fmt.Errorf("scripted: round %d: %w", req.Round, err)
	}

	// Text answers at once, whole, as a model that does not stream; only
	// Deltas stream, in time.
	var text, thinking strings.Builder
	for _, piece := range r.Text {
		text.WriteString(piece)
	}
	for _, d := range r.Deltas {
		if err := sleep(ctx, d.After); err != nil {
			return runtime.RoundResult{}, fmt.Errorf("scripted: round %d: %w", req.Round, err)
		}
		if onDelta != nil {
			onDelta(runtime.Delta{Text: d.Text, Thinking: d.Thinking})
		}
		if d.Thinking {
			thinking.WriteString(d.Text)
		} else {
			text.WriteString(d.Text)
		}
	}

	prompt, turn := lastPrompt(req.Messages)
	vars := strings.NewReplacer("${prompt}", prompt, "${order_id}", findOrderID(prompt))
	res := runtime.RoundResult{Text: text.String(), Thinking: thinking.String()}
	for i, c := range r.ToolCalls {
		args, err := json.Marshal(substitute(c.Arguments, vars))
		if err != nil {
			return runtime.RoundResult{}, fmt.Errorf("scripted: round %d: arguments of %s: %w", req.Round, c.Name, err)
		}
		id := fmt.Sprintf("call_%d_%d", req.Round, i+1)
		if turn > 1 {
			// Call ids stay unique in the transcript, as a real model's.
			id = fmt.Sprintf("call_t%d_%d_%d", turn, req.Round, i+1)
		}
		res.ToolCalls = append(res.ToolCalls, runtime.ToolCall{
			ID:        id,
			Name:      c.Name,
			Arguments: args,
		})
	}

	chars := 0
	for _, m := range req.Messages {
		chars += utf8.RuneCountInString(m.Content)
	}
	res.Usage = runtime.Usage{
		InputTokens:  max(chars/4, 1),
		OutputTokens: utf8.RuneCountInString(res.Text)/4 + 10*len(res.ToolCalls),
	}
	return res, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// denied reports whether a person denied one of the calls of the model's
// last message, or nobody decided it in time: the engine answers such a call with a result that says so.
func denied(msgs []runtime.Message) bool {
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role == "tool"; i-- {
		if msgs[i].IsError && (strings.HasPrefix(msgs[i].Content, runtime.DeniedPrefix) ||
			strings.HasPrefix(msgs[i].Content, runtime.ExpiredPrefix)) {
			return true
		}
	}
	return false
}

// lastPrompt is the content of the last user message (the run's prompt,
// or the message that started the current turn) and how many user
// messages there are (the conversation's turn).
func lastPrompt(msgs []runtime.Message) (prompt string, turn int) {
	for _, m := range msgs {
		if m.Role == "user" {
			prompt, turn = m.Content, turn+1
		}
	}
	return prompt, turn
}

// findOrderID picks an order number such as ORD-1042 out of a prompt; a
// prompt without one is taken as the order id itself.
func findOrderID(prompt string) string {
	if id := orderID.FindString(prompt); id != "" {
		return id
	}
	return strings.TrimSpace(prompt)
}

// substitute returns a copy of v with the variables replaced in every
// string; the script itself is never changed.
func substitute(v any, vars *strings.Replacer) any {
	switch v := v.(type) {
	case string:
		return vars.Replace(v)
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = substitute(e, vars)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = substitute(e, vars)
		}
		return l
	default:
		return v
	}
}
