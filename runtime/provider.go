package runtime

import (
	"context"
)

// Provider is a language model behind one interface: one call is one round,
// messages and tool specs in, text and tool calls out.
type Provider interface {
	// Round runs one round. Pieces of its answer and of its thinking go to
	// onDelta as they arrive, in order (it may be nil). An error means the
	// round produced nothing usable; the run settles as failed with
	// ReasonProviderFailed.
	Round(ctx context.Context, req RoundRequest, onDelta func(Delta)) (RoundResult, error)
}

// Delta is a piece of text a provider streams during a round: of the
// model's answer, or of its reasoning (Thinking).
type Delta struct {
	Text     string
	Thinking bool
	// Turn is the conversation's turn of the round; the engine sets it
	// for readers, a provider leaves it 0.
	Turn int
}

// RoundRequest is what a provider sees of a run.
type RoundRequest struct {
	// Round counts from 1: the number of provider rounds of the
	// conversation's current turn so far, plus one.
	Round    int
	Model    string
	Messages []Message
	Tools    []ToolSpec
	// Title: the round asks for the conversation's title (see title.go),
	// in at most MaxTokens tokens (0: the provider's default).
	Title     bool
	MaxTokens int
}

// RoundResult is what one round produced.
type RoundResult struct {
	Text string
	// Thinking is the reasoning the model streamed before or beside its
	// answer, kept as the thinking part of its message.
	Thinking  string
	ToolCalls []ToolCall
	Usage     Usage
}

// ProviderFactory builds the provider a configuration names; an error is a
// configuration the engine cannot run.
type ProviderFactory func(cfg *Configuration) (Provider, error)
