package openai

import (
	"encoding/json"
	"errors"
	"fmt"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/turnstile-dev/turnstile/runtime"
)

// params turns a round's request into a streamed chat completion request.
// It fails on a message of an unknown role and on a tool whose parameters
// are not a JSON object.
func (p *Provider) params(req runtime.RoundRequest) (sdk.ChatCompletionNewParams, error) {
	model := req.Model
	if model == "" {
		model = p.model
	}
	params := sdk.ChatCompletionNewParams{
		Model: model,
		// Without include_usage a streamed completion reports no tokens.
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}
	if req.MaxTokens > 0 {
		// max_tokens, not max_completion_tokens: compatible endpoints
		// know the older name.
		params.MaxTokens = sdk.Int(int64(req.MaxTokens))
	}
	for i, m := range req.Messages {
		msg, err := message(m)
		if err != nil {
			return params, fmt.Errorf("openai: message %d: %w", i+1, err)
		}
		params.Messages = append(params.Messages, msg)
	}
	for _, t := range req.Tools {
		tool, err := toolParam(t)
		if err != nil {
			return params, fmt.Errorf("openai: tool %s: %w", t.Name, err)
		}
		params.Tools = append(params.Tools, tool)
	}
	return params, nil
}

func message(m runtime.Message) (sdk.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case "system":
		return sdk.SystemMessage(m.Content), nil
	case "user":
		return sdk.UserMessage(m.Content), nil
	case "tool":
		if m.ToolCallID == "" {
			return sdk.ChatCompletionMessageParamUnion{}, errors.New("a tool result without a tool_call_id")
		}
		return sdk.ToolMessage(m.Content, m.ToolCallID), nil
	case "assistant":
		var a sdk.ChatCompletionAssistantMessageParam
		// Content may be absent only when there are tool calls.
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = sdk.String(m.Content)
		}
		for _, tc := range m.ToolCalls {
			args := string(tc.Arguments)
			if args == "" || args == "null" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, sdk.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &sdk.ChatCompletionMessageFunctionToolCallParam{
					ID:       tc.ID,
					Function: sdk.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args},
				},
			})
		}
		return sdk.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	default:
		return sdk.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
	}
}

func toolParam(t runtime.ToolSpec) (sdk.ChatCompletionToolUnionParam, error) {
	def := shared.FunctionDefinitionParam{Name: t.Name}
	if t.Description != "" {
		def.Description = sdk.String(t.Description)
	}
	if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
		if err := json.Unmarshal(t.Parameters, &def.Parameters); err != nil {
			return sdk.ChatCompletionToolUnionParam{}, fmt.Errorf("parameters are not a JSON object: %w", err)
		}
		stripSchema(def.Parameters)
	}
	return sdk.ChatCompletionFunctionTool(def), nil
}

// Keywords whose value is a schema, a list of schemas, or an object of
// schemas by name: where stripSchema looks for nested schemas. Anything
// else (a property's name, a default value, an enum) is data and kept as
// it is, even when it holds a "$schema" key.
var (
	subschema     = []string{"additionalItems", "additionalProperties", "contains", "else", "if", "items", "not", "propertyNames", "then", "unevaluatedItems", "unevaluatedProperties"}
	subschemaList = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	subschemaMap  = []string{"$defs", "definitions", "dependencies", "dependentSchemas", "patternProperties", "properties"}
)

// stripSchema removes the "$schema" keyword from a JSON Schema and every
// schema nested in it. MCP servers send it (the Go SDK's schemas carry
// draft 2020-12's) and some OpenAI-compatible endpoints refuse a request
// that has it; a model needs it for nothing.
func stripSchema(schema map[string]any) {
	delete(schema, "$schema")
	for _, k := range subschema {
		if m, ok := schema[k].(map[string]any); ok {
			stripSchema(m)
		}
	}
	for _, k := range subschemaList {
		if list, ok := schema[k].([]any); ok {
			for _, v := range list {
				if m, ok := v.(map[string]any); ok {
					stripSchema(m)
				}
			}
		}
	}
	for _, k := range subschemaMap {
		if byName, ok := schema[k].(map[string]any); ok {
			for _, v := range byName {
				// dependencies holds lists of names beside schemas.
				if m, ok := v.(map[string]any); ok {
					stripSchema(m)
				}
			}
		}
	}
}

// result reads the accumulated completion: the first choice's text (or
// refusal), its tool calls in index order, and the usage. A stream without
// a choice, a tool call without a name and arguments that are not JSON are
// errors: the arguments become part of the run's stored state, which must
// stay valid JSON.
func result(round int, acc *sdk.ChatCompletionAccumulator) (runtime.RoundResult, error) {
	if len(acc.Choices) == 0 {
		return runtime.RoundResult{}, errors.New("openai: the reply has no choices")
	}
	choice := acc.Choices[0]
	res := runtime.RoundResult{
		Text: choice.Message.Content,
		Usage: runtime.Usage{
			InputTokens:  int(acc.Usage.PromptTokens),
			OutputTokens: int(acc.Usage.CompletionTokens),
		},
	}
	if res.Text == "" {
		res.Text = choice.Message.Refusal
	}
	for i, tc := range choice.Message.ToolCalls {
		if tc.Function.Name == "" {
			return runtime.RoundResult{}, fmt.Errorf("openai: tool call %d has no name", i+1)
		}
		args := json.RawMessage(tc.Function.Arguments)
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		if !json.Valid(args) {
			return runtime.RoundResult{}, fmt.Errorf("openai: the arguments of tool call %d (%s) are not JSON (finish reason %q)", i+1, tc.Function.Name, choice.FinishReason)
		}
		id := tc.ID
		if id == "" {
			// Some compatible servers send no ids; the engine pairs results
			// with calls by id, so make one that is unique within the run.
			id = fmt.Sprintf("call_%d_%d", round, i+1)
		}
		res.ToolCalls = append(res.ToolCalls, runtime.ToolCall{ID: id, Name: tc.Function.Name, Arguments: args})
	}
	return res, nil
}
