package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A run is a conversation of turns. The first prompt is turn 1; once the
// run has settled, its owner (or an admin) may send another message, which
// starts the next turn with the whole transcript and the configuration's
// current version. Every event and transcript message names its turn; a
// turn opens with a turn_started event and closes with a turn_ended one,
// recorded in the commit that settles it. One turn is active at a time:
// the store starts a turn with a guarded UPDATE of a settled run at the
// turn it was read at, so of any number of messages sent at once exactly
// one starts a turn and the others are refused with run_busy.

// MessageRequest sends a follow-up message into a run.
type MessageRequest struct {
	RunID   int64
	Content string
	Actor   Actor
}

// NextTurn is what the store writes to start a run's next turn, in one
// transaction: the run row moved from a settled status at turn From to
// Status (running, held by ClaimedBy, or queued for a worker) at turn
// From+1, with its new checkpoint and configuration version; the turn's
// first transcript messages from index FirstMessage; its turn_started
// event.
type NextTurn struct {
	RunID           int64
	From            int
	ConfigurationID int64
	Status          Status
	ClaimedBy       string
	Lease           time.Duration
	State           []byte
	Messages        [][]byte
	FirstMessage    int
	Event           Event
	// Credential is minted with the turn: a forwarding run's whose turn
	// runs in the request (see identity.go).
	Credential *CredentialMint
}

// SendMessage starts the next turn of a settled run, held by the caller,
// and returns its continuation, which runs the turn until it pauses or
// settles. Refusals: not_found (also for a run the actor may not read),
// run_busy, invalid_request, inactive_configuration, unreadable_state.
func (e *Engine) SendMessage(ctx context.Context, req MessageRequest) (*Continuation, error) {
	run, cfg, state, mint, err := e.nextTurn(ctx, req, StatusRunning)
	if err != nil {
		return nil, err
	}
	c := e.continuation(run, cfg, state, nil)
	c.stored = len(state.Messages)
	c.minted(mint)
	return c, nil
}

// QueueMessage starts the next turn of a settled run for a worker to
// carry out (the durable path), with SendMessage's refusals.
func (e *Engine) QueueMessage(ctx context.Context, req MessageRequest) error {
	_, _, _, _, err := e.nextTurn(ctx, req, StatusQueued)
	return err
}

// nextTurn checks a follow-up message and starts its turn in the store,
// in status running (held by this process) or queued, and returns the
// credential the turn's commit minted for a forwarding run that runs.
func (e *Engine) nextTurn(ctx context.Context, req MessageRequest, status Status) (*Run, *Configuration, State, *CredentialMint, error) {
	content, err := checkPrompt(req.Content, "message")
	if err != nil {
		return nil, nil, State{}, nil, err
	}
	run, err := e.store.Run(ctx, req.RunID)
	if errors.Is(err, ErrNotFound) || (err == nil && !req.Actor.MayRead(run.OwnerID)) {
		// Who may not read a run learns nothing of it, not even that it
		// exists (see MayRead).
		return nil, nil, State{}, nil, refuse(CodeNotFound, "no run %d", req.RunID)
	}
	if err != nil {
		return nil, nil, State{}, nil, err
	}
	if !run.Status.Terminal() {
		return nil, nil, State{}, nil, refuse(CodeRunBusy,
			"run %d is %s: its turn %d has not ended; send the message once the run has settled",
			run.ID, run.Status, run.ConversationTurn)
	}
	cfg, err := e.currentConfiguration(ctx, run)
	if err != nil {
		return nil, nil, State{}, nil, err
	}
	state, err := e.decodeState(run.ID, run.State)
	if err != nil {
		return nil, nil, State{}, nil, refuse(CodeUnreadableState, "the saved state of run %d cannot be read: %s", run.ID, whyUnreadable(err))
	}
	resumed, err := e.store.Resume(ctx, run.ID, true)
	if err != nil {
		return nil, nil, State{}, nil, err
	}
	if state.Messages, err = e.decodeMessages(run.ID, resumed.Messages); err != nil {
		return nil, nil, State{}, nil, refuse(CodeUnreadableState, "the transcript of run %d cannot be read: %s", run.ID, whyUnreadable(err))
	}
	first := len(state.Messages)
	state.Messages = append(state.Messages, closeUnanswered(state.Messages)...)
	state.Messages = append(state.Messages, Message{Role: "user", Content: content})
	// The decisions of the turns before stay in the transcript; what the
	// new turn decides starts afresh, and its rounds count from here.
	state.Pending, state.Verdicts, state.Said, state.FirstRound = nil, nil, "", state.Iterations

	turn := run.ConversationTurn + 1
	blob, err := e.encodeState(run.ID, state)
	if err != nil {
		return nil, nil, State{}, nil, err
	}
	msgs, err := e.encodeMessages(run.ID, first, state.Messages[first:])
	if err != nil {
		return nil, nil, State{}, nil, err
	}
	ev := Event{Seq: resumed.LastSeq + 1, Turn: turn, Kind: KindTurnStarted,
		Payload: filter(cfg.PrivacyLevel, TurnStartedPayload{Turn: turn, Content: Content{Value: content}, By: req.Actor.Name})}
	stored, err := e.sealEvents(&Run{ID: run.ID, ConversationTurn: turn}, []Event{ev})
	if err != nil {
		return nil, nil, State{}, nil, err
	}
	next := NextTurn{RunID: run.ID, From: run.ConversationTurn, ConfigurationID: cfg.ID, Status: status,
		State: blob, Messages: msgs, FirstMessage: first, Event: stored[0]}
	if status == StatusRunning {
		next.ClaimedBy, next.Lease = holderID(), e.lease
		next.Credential = e.credentialMint(run, cfg)
	}
	if err := e.store.StartTurn(ctx, next); errors.Is(err, ErrClaimLost) {
		return nil, nil, State{}, nil, refuse(CodeRunBusy, "run %d has just started another turn; send the message once it has settled", run.ID)
	} else if err != nil {
		return nil, nil, State{}, nil, err
	}
	run.Status, run.ClaimedBy, run.ConversationTurn, run.ConfigurationID = status, next.ClaimedBy, turn, cfg.ID
	run.TerminationReason, run.Answer, run.TurnDigest, run.PendingEffect, run.CancelRequested = "", "", "", "", false
	run.State = blob
	return run, cfg, state, next.Credential, nil
}

// currentConfiguration is the active version of the configuration a run
// was started with: a new turn runs under what the agent is now.
func (e *Engine) currentConfiguration(ctx context.Context, run *Run) (*Configuration, error) {
	was, err := e.store.Configuration(ctx, run.ConfigurationID)
	if err != nil {
		return nil, fmt.Errorf("runtime: configuration of run %d: %w", run.ID, err)
	}
	cfg, err := e.store.ConfigurationByIdentifier(ctx, was.Identifier)
	if errors.Is(err, ErrNotFound) {
		return nil, refuse(CodeInactiveConfiguration, "the agent %q of run %d no longer exists", was.Identifier, run.ID)
	}
	if err != nil {
		return nil, err
	}
	if !cfg.Active {
		return nil, refuse(CodeInactiveConfiguration, "the agent %q of run %d is switched off", cfg.Identifier, run.ID)
	}
	for _, name := range cfg.Tools {
		if _, ok := e.tools[name]; !ok {
			return nil, refuse(CodeInvalidRequest, "configuration %q names tool %q, which this server does not have", cfg.Identifier, name)
		}
	}
	return cfg, nil
}

// closeUnanswered answers the calls of the transcript's last model message
// that never ran (a turn cancelled or failed before them), so that the
// transcript a model reads next has a result for every call, and the new
// turn does not take them for its own to run.
func closeUnanswered(msgs []Message) []Message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		answered := map[string]bool{}
		for _, m := range msgs[i+1:] {
			if m.Role == "tool" {
				answered[m.ToolCallID] = true
			}
		}
		var out []Message
		for _, call := range msgs[i].ToolCalls {
			if !answered[call.ID] {
				out = append(out, Message{Role: "tool", ToolCallID: call.ID, ToolName: call.Name, IsError: true,
					Content: "not run: the turn ended before this call ran"})
			}
		}
		return out
	}
	return nil
}
