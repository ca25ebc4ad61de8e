package openai

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// request is a round as the engine asks for it.
var request = runtime.RoundRequest{
	Round:    1,
	Messages: []runtime.Message{{Role: "system", Content: "You help with orders."}, {Role: "user", Content: "Refund ORD-1042"}},
}

// round runs one round, collecting the deltas.
func round(t *testing.T, p *Provider, req runtime.RoundRequest) (runtime.RoundResult, []string, error) {
	t.Helper()
	var deltas []string
	res, err := p.Round(context.Background(), req, func(d runtime.Delta) { deltas = append(deltas, d.Text) })
	noKey(t, err)
	return res, deltas, err
}

// noKey fails the test when an error holds the key.
func noKey(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), testKey) {
		t.Errorf("the error holds the key: %v", err)
	}
}

func TestRoundText(t *testing.T) {
	f := newFake(t, replay("text.sse"))
	res, deltas, err := round(t, f.provider(t), request)
	if err != nil {
		t.Fatalf("Round: %v", err)
	}
	wantDeltas := []string{"Order", " ORD", "-104", "2 was", " delivered", " on 3 March", "; a refund", " of €12.50", " is possible", "."}
	if !reflect.DeepEqual(deltas, wantDeltas) {
		t.Errorf("deltas = %q, want %q", deltas, wantDeltas)
	}
	if want := strings.Join(wantDeltas, ""); res.Text != want {
		t.Errorf("text = %q, want %q", res.Text, want)
	}
	if len(res.ToolCalls) != 0 {
		t.Errorf("tool calls = %v, want none", res.ToolCalls)
	}
	if want := (runtime.Usage{InputTokens: 187, OutputTokens: 23}); res.Usage != want {
		t.Errorf("usage = %+v, want %+v", res.Usage, want)
	}
	if got := f.requests(); got != 1 {
		t.Errorf("requests = %d, want 1", got)
	}
}

func TestRoundNilOnDelta(t *testing.T) {
	f := newFake(t, replay("text.sse"))
	res, err := f.provider(t).Round(context.Background(), request, nil)
	if err != nil {
		t.Fatalf("Round: %v", err)
	}
	if !strings.HasPrefix(res.Text, "Order ORD-1042 was delivered") {
		t.Errorf("text = %q", res.Text)
	}
}

func TestRoundToolCalls(t *testing.T) {
	lookup := runtime.ToolCall{ID: "call_7fKp2Lm9QzX4vN8rB1tY6cHs", Name: "lookup_order",
		Arguments: json.RawMessage(`{"order_id":"ORD-1042"}`)}
	refund := runtime.ToolCall{ID: "call_Vd3Wq8Zn5Rk1Jx7Mb4Tf2LpA", Name: "refund_order",
		Arguments: json.RawMessage(`{"order_id":"ORD-1042","amount_cents": 1250,"reason":"damaged in transit — box \"crushed\""}`)}
	tests := []struct {
		name      string
		fixture   string
		wantText  string
		wantCalls []runtime.ToolCall
		wantUsage runtime.Usage
	}{
		{"one call", "tool_call.sse", "", []runtime.ToolCall{{ID: "call_Qm3kV8pX2aZ7cN1rT5yH9bLd", Name: "lookup_order",
			Arguments: json.RawMessage(`{"order_id":"ORD-1042"}`)}}, runtime.Usage{InputTokens: 241, OutputTokens: 18}},
		{"two parallel calls, one after the other", "parallel_tool_calls.sse", "",
			[]runtime.ToolCall{lookup, refund}, runtime.Usage{InputTokens: 312, OutputTokens: 61}},
		{"two parallel calls, interleaved", "parallel_interleaved.sse", "Looking that up. ",
			[]runtime.ToolCall{lookup, refund}, runtime.Usage{InputTokens: 312, OutputTokens: 64}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, replay(tt.fixture))
			res, _, err := round(t, f.provider(t), request)
			if err != nil {
				t.Fatalf("Round: %v", err)
			}
			if res.Text != tt.wantText {
				t.Errorf("text = %q, want %q", res.Text, tt.wantText)
			}
			if len(res.ToolCalls) != len(tt.wantCalls) {
				t.Fatalf("tool calls = %d, want %d: %+v", len(res.ToolCalls), len(tt.wantCalls), res.ToolCalls)
			}
			for i, got := range res.ToolCalls {
				want := tt.wantCalls[i]
				if got.ID != want.ID || got.Name != want.Name || string(got.Arguments) != string(want.Arguments) {
					t.Errorf("tool call %d = %s %s %s, want %s %s %s", i, got.ID, got.Name, got.Arguments, want.ID, want.Name, want.Arguments)
				}
			}
			if res.Usage != tt.wantUsage {
				t.Errorf("usage = %+v, want %+v", res.Usage, tt.wantUsage)
			}
		})
	}
}

func TestRoundRequestBody(t *testing.T) {
	f := newFake(t, replay("text.sse"))
	req := runtime.RoundRequest{
		Round: 2,
		Model: "gpt-4o-2024-08-06",
		Messages: []runtime.Message{
			{Role: "system", Content: "You help with orders."},
			{Role: "user", Content: "Refund ORD-1042"},
			{Role: "assistant", ToolCalls: []runtime.ToolCall{
				{ID: "call_1", Name: "lookup_order", Arguments: json.RawMessage(`{"order_id":"ORD-1042"}`)},
				{ID: "call_2", Name: "ask_operator"},
			}},
			{Role: "tool", ToolCallID: "call_1", ToolName: "lookup_order", Content: `{"status":"delivered"}`},
			{Role: "tool", ToolCallID: "call_2", ToolName: "ask_operator", Content: "denied by ana: not now", IsError: true},
		},
		Tools: []runtime.ToolSpec{
			{Name: "lookup_order", Description: "Look an order up.", Effect: runtime.ReadOnly,
				Parameters: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}`)},
			{Name: "slow_task", Effect: runtime.ReadOnly},
		},
	}
	if _, _, err := round(t, f.provider(t), req); err != nil {
		t.Fatalf("Round: %v", err)
	}
	if got, want := f.authorization(0), "Bearer "+testKey; got != want {
		t.Errorf("Authorization = %q, want the key as a bearer token", got)
	}
	got := f.body(0)
	want := map[string]any{
		"model":          "gpt-4o-2024-08-06",
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		"messages": []any{
			map[string]any{"role": "system", "content": "You help with orders."},
			map[string]any{"role": "user", "content": "Refund ORD-1042"},
			map[string]any{"role": "assistant", "tool_calls": []any{
				map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "lookup_order", "arguments": `{"order_id":"ORD-1042"}`}},
				map[string]any{"id": "call_2", "type": "function", "function": map[string]any{"name": "ask_operator", "arguments": "{}"}},
			}},
			map[string]any{"role": "tool", "tool_call_id": "call_1", "content": `{"status":"delivered"}`},
			map[string]any{"role": "tool", "tool_call_id": "call_2", "content": "denied by ana: not now"},
		},
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{
				"name": "lookup_order", "description": "Look an order up.",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}},
					"required": []any{"order_id"}},
			}},
			map[string]any{"type": "function", "function": map[string]any{"name": "slow_task"}},
		},
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("request body:\n%s\nwant:\n%s", g, w)
	}
}

func TestRoundModelDefault(t *testing.T) {
	f := newFake(t, replay("text.sse"))
	if _, _, err := round(t, f.provider(t), request); err != nil {
		t.Fatalf("Round: %v", err)
	}
	if got := f.body(0)["model"]; got != "gpt-4o-mini" {
		t.Errorf("model = %v, want the provider's gpt-4o-mini when the request names none", got)
	}
}

func TestRoundRetries(t *testing.T) {
	t.Run("429 then success", func(t *testing.T) {
		f := newFake(t, status(http.StatusTooManyRequests, "429.json", "Retry-After-Ms", "2",
			"X-Ratelimit-Limit-Requests", "3", "X-Ratelimit-Remaining-Requests", "0"), replay("text.sse"))
		res, _, err := round(t, f.provider(t), request)
		if err != nil {
			t.Fatalf("Round: %v", err)
		}
		if !strings.HasPrefix(res.Text, "Order ORD-1042") {
			t.Errorf("text = %q", res.Text)
		}
		if got := f.requests(); got != 2 {
			t.Errorf("requests = %d, want 2", got)
		}
	})
	t.Run("500 three times", func(t *testing.T) {
		f := newFake(t, status(http.StatusInternalServerError, "500.json"))
		_, _, err := round(t, f.provider(t), request)
		if err == nil {
			t.Fatal("Round succeeded, want an error")
		}
		want := "openai: the model endpoint failed (HTTP 500): The server had an error while processing your request. Sorry about that!"
		if err.Error() != want {
			t.Errorf("error = %q, want %q", err, want)
		}
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != http.StatusInternalServerError {
			t.Errorf("error %v is not a StatusError with 500", err)
		}
		if got := f.requests(); got != 3 {
			t.Errorf("requests = %d, want 3", got)
		}
	})
	t.Run("401 is not repeated and its echo of the key is redacted", func(t *testing.T) {
		f := newFake(t, status(http.StatusUnauthorized, "401.json"))
		_, _, err := round(t, f.provider(t), request)
		if err == nil {
			t.Fatal("Round succeeded, want an error")
		}
		if !strings.HasPrefix(err.Error(), "openai: the model endpoint refused the API key (401): Incorrect API key provided: [redacted].") {
			t.Errorf("error = %q", err)
		}
		if got := f.requests(); got != 1 {
			t.Errorf("requests = %d, want 1", got)
		}
	})
}

func TestRoundBrokenStreams(t *testing.T) {
	tests := []struct {
		name  string
		reply reply
		want  string
	}{
		{"ends before [DONE]", replay("cut.sse"), "openai: the stream broke off: the stream ended before [DONE]"},
		{"connection dropped", hangUp("cut.sse"), "openai: the stream broke off: unexpected EOF"},
		{"error event", replay("stream_error.sse"), "openai: the stream reported an error: The server had an error processing your request. Sorry about that!"},
		{"chunk that is not JSON", replay("malformed_chunk.sse"), "openai: the model endpoint sent a chunk that is not JSON (chunk 4, byte 81)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.reply)
			res, _, err := round(t, f.provider(t), request)
			if err == nil {
				t.Fatalf("Round = %+v, want an error", res)
			}
			if err.Error() != tt.want {
				t.Errorf("error = %q, want %q", err, tt.want)
			}
			if !reflect.DeepEqual(res, runtime.RoundResult{}) {
				t.Errorf("result = %+v, want none", res)
			}
			if got := f.requests(); got != 1 {
				t.Errorf("requests = %d, want 1 (a stream that began is not repeated)", got)
			}
		})
	}
}

// TestRoundChunkNotJSON: a malformed chunk is a *ChunkError that locates
// it and keeps the parser's error, and the deltas before it were delivered.
func TestRoundChunkNotJSON(t *testing.T) {
	f := newFake(t, replay("malformed_chunk.sse"))
	_, deltas, err := round(t, f.provider(t), request)
	var ce *ChunkError
	if !errors.As(err, &ce) || ce.Index != 4 || ce.Offset != 81 {
		t.Fatalf("error = %#v, want a ChunkError at chunk 4, byte 81", err)
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		t.Errorf("error %v does not unwrap to the parser's *json.SyntaxError", err)
	}
	if strings.Contains(err.Error(), "invalid character") {
		t.Errorf("error = %q, want it to say what went wrong instead of the parser's words", err)
	}
	if want := []string{"Order", " ORD"}; !reflect.DeepEqual(deltas, want) {
		t.Errorf("deltas = %q, want %q", deltas, want)
	}
}

// TestRoundToolParametersWithoutSchemaKeyword: "$schema" is left out of
// every schema of a tool's parameters, nested ones included, and kept where
// it is a property's name or part of a value.
func TestRoundToolParametersWithoutSchemaKeyword(t *testing.T) {
	f := newFake(t, replay("text.sse"))
	const params = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"properties":{
			"order":{"$schema":"x","type":"object","properties":{"id":{"type":"string","$schema":"x"}},"additionalProperties":{"$schema":"x"}},
			"lines":{"type":"array","items":{"$schema":"x","type":"integer"}},
			"tuple":{"type":"array","prefixItems":[{"$schema":"x","type":"string"}]},
			"either":{"anyOf":[{"$schema":"x","type":"string"},{"$ref":"#/$defs/money"}]},
			"$schema":{"type":"string","description":"a property that happens to be named $schema"},
			"meta":{"type":"object","default":{"$schema":"kept: a default is data"},"enum":[{"$schema":"kept"}]}
		},
		"$defs":{"money":{"$schema":"x","type":"integer","not":{"$schema":"x","minimum":0}}},
		"required":["order","$schema"]}`
	const want = `{"type":"object",
		"properties":{
			"order":{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":{}},
			"lines":{"type":"array","items":{"type":"integer"}},
			"tuple":{"type":"array","prefixItems":[{"type":"string"}]},
			"either":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/money"}]},
			"$schema":{"type":"string","description":"a property that happens to be named $schema"},
			"meta":{"type":"object","default":{"$schema":"kept: a default is data"},"enum":[{"$schema":"kept"}]}
		},
		"$defs":{"money":{"type":"integer","not":{"minimum":0}}},
		"required":["order","$schema"]}`
	req := request
	req.Tools = []runtime.ToolSpec{{Name: "orders__update", Parameters: json.RawMessage(params)}}
	if _, _, err := round(t, f.provider(t), req); err != nil {
		t.Fatalf("Round: %v", err)
	}
	tools, _ := f.body(0)["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("tools sent = %v, want one", f.body(0)["tools"])
	}
	fn, _ := tools[0].(map[string]any)["function"].(map[string]any)
	var wantParams any
	if err := json.Unmarshal([]byte(want), &wantParams); err != nil {
		t.Fatal(err)
	}
	if got := fn["parameters"]; !reflect.DeepEqual(got, wantParams) {
		g, _ := json.MarshalIndent(got, "", "  ")
		t.Errorf("parameters sent:\n%s\nwant:\n%s", g, want)
	}
}

func TestRoundTimeout(t *testing.T) {
	tests := []struct {
		name       string
		reply      reply
		wantDeltas int
	}{
		{"before the response", stall("text.sse", 0), 0},
		{"in the middle of the stream", stall("text.sse", 3), 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.reply)
			p := f.provider(t, func(o *Options) { o.Timeout = 150 * time.Millisecond })
			start := time.Now()
			_, deltas, err := round(t, p, request)
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("Round took %s with a timeout of 150ms", took)
			}
			if err == nil {
				t.Fatal("Round succeeded, want a timeout")
			}
			if want := "openai: no complete reply within 150ms: context deadline exceeded"; err.Error() != want {
				t.Errorf("error = %q, want %q", err, want)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v is not context.DeadlineExceeded", err)
			}
			if len(deltas) != tt.wantDeltas {
				t.Errorf("deltas = %q, want %d", deltas, tt.wantDeltas)
			}
		})
	}
}

func TestRoundCallerCancels(t *testing.T) {
	f := newFake(t, stall("text.sse", 2))
	ctx, cancel := context.WithCancel(context.Background())
	_, err := f.provider(t).Round(ctx, request, func(runtime.Delta) { cancel() })
	noKey(t, err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error = %v, want context.Canceled", err)
	}
}

func TestRoundBadInput(t *testing.T) {
	f := newFake(t, replay("text.sse"))
	p := f.provider(t)
	tests := []struct {
		name string
		req  runtime.RoundRequest
		want string
	}{
		{"unknown role", runtime.RoundRequest{Messages: []runtime.Message{{Role: "narrator", Content: "x"}}},
			`openai: message 1: unknown role "narrator"`},
		{"tool result without id", runtime.RoundRequest{Messages: []runtime.Message{{Role: "user"}, {Role: "tool", Content: "x"}}},
			"openai: message 2: a tool result without a tool_call_id"},
		{"parameters not an object", runtime.RoundRequest{Tools: []runtime.ToolSpec{{Name: "t", Parameters: json.RawMessage(`[1]`)}}},
			"openai: tool t: parameters are not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := round(t, p, tt.req)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error = %v, want %q", err, tt.want)
			}
		})
	}
	if got := f.requests(); got != 0 {
		t.Errorf("requests = %d, want 0", got)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no key", Options{Model: "gpt-4o-mini"}, "openai: no API key"},
		{"no model", Options{APIKey: testKey}, "openai: no model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.opts)
			if err == nil || err.Error() != tt.want {
				t.Errorf("New error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestFactory(t *testing.T) {
	f := newFake(t, replay("text.sse"))
	cfg := func(spec runtime.ProviderSpec) *runtime.Configuration {
		return &runtime.Configuration{Identifier: "support", Provider: spec}
	}
	t.Setenv("TEST_OPENAI_KEY", testKey)
	t.Setenv("TURNSTILE_STATE_KEYS", testKey)
	t.Setenv(DefaultAPIKeyEnv, "")

	t.Run("builds a provider from the configuration", func(t *testing.T) {
		p, err := Factory(cfg(runtime.ProviderSpec{Type: TypeOpenAI, Model: "gpt-4o-mini",
			BaseURL: f.srv.URL + "/v1", APIKeyEnv: "TEST_OPENAI_KEY"}))
		if err != nil {
			t.Fatalf("Factory: %v", err)
		}
		res, err := p.Round(context.Background(), request, nil)
		if err != nil {
			t.Fatalf("Round: %v", err)
		}
		if res.Text == "" {
			t.Error("no text")
		}
		if got, want := f.authorization(0), "Bearer "+testKey; got != want {
			t.Errorf("Authorization = %q, want the key of TEST_OPENAI_KEY", got)
		}
	})

	errs := []struct {
		name string
		cfg  *runtime.Configuration
		want string
	}{
		{"no configuration", nil, "openai: no configuration"},
		{"another type", cfg(runtime.ProviderSpec{Type: "scripted", Model: "m"}),
			`openai: configuration support: provider type "scripted" is not "openai"`},
		{"no model", cfg(runtime.ProviderSpec{Type: TypeOpenAI, APIKeyEnv: "TEST_OPENAI_KEY"}),
			"openai: configuration support: the provider needs a model"},
		{"variable unset", cfg(runtime.ProviderSpec{Type: TypeOpenAI, Model: "m", APIKeyEnv: "TEST_UNSET_OPENAI_KEY"}),
			"openai: configuration support: the API key variable TEST_UNSET_OPENAI_KEY is not set"},
		// Set or not, Turnstile's own variables are never sent as a key.
		{"reserved variable", cfg(runtime.ProviderSpec{Type: TypeOpenAI, Model: "m", BaseURL: f.srv.URL + "/v1", APIKeyEnv: "TURNSTILE_STATE_KEYS"}),
			"openai: configuration support: api_key_env: TURNSTILE_STATE_KEYS is reserved: a configuration may not read Turnstile's own environment variables (TURNSTILE_*, HTTP_PROXY, HTTPS_PROXY, NO_PROXY)"},
		{"default variable unset", cfg(runtime.ProviderSpec{Type: TypeOpenAI, Model: "m"}),
			"openai: configuration support: the API key variable OPENAI_API_KEY is not set"},
		{"base URL that does not parse", cfg(runtime.ProviderSpec{Type: TypeOpenAI, Model: "m", BaseURL: "http://[::1",
			APIKeyEnv: "TEST_OPENAI_KEY"}), `openai: configuration support: base URL "http://[::1" is not an http or https URL`},
		{"base URL without a scheme", cfg(runtime.ProviderSpec{Type: TypeOpenAI, Model: "m", BaseURL: "localhost:11434/v1",
			APIKeyEnv: "TEST_OPENAI_KEY"}), `openai: configuration support: base URL "localhost:11434/v1" is not an http or https URL`},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Factory(tt.cfg)
			noKey(t, err)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Factory error = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestRoundTitleRequest: the round that asks for a title is one short
// request: the instruction and the prompt, no tools, max_tokens.
func TestRoundTitleRequest(t *testing.T) {
	f := newFake(t, replay("text.sse"))
	req := runtime.RoundRequest{Round: 1, Title: true, MaxTokens: 32, Messages: []runtime.Message{
		{Role: "system", Content: "Write a title."}, {Role: "user", Content: "Refund ORD-1042"}}}
	res, _, err := round(t, f.provider(t), req)
	if err != nil || res.Text == "" {
		t.Fatalf("Round = %+v, %v", res, err)
	}
	body := f.body(0)
	if body["max_tokens"] != float64(32) || body["tools"] != nil || len(body["messages"].([]any)) != 2 {
		t.Errorf("title request body = %v, want two messages, max_tokens 32 and no tools", body)
	}
}

func TestRoundThinking(t *testing.T) {
	f := newFake(t, replay("reasoning.sse"))
	var got []runtime.Delta
	res, err := f.provider(t).Round(context.Background(), request, func(d runtime.Delta) { got = append(got, d) })
	if err != nil {
		t.Fatalf("Round: %v", err)
	}
	want := []runtime.Delta{{Text: "The customer ", Thinking: true}, {Text: "asks about ORD-1042; ", Thinking: true},
		{Text: "check delivery first.", Thinking: true}, {Text: "It was "}, {Text: "delivered."}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("deltas = %+v\nwant %+v", got, want)
	}
	if res.Text != "It was delivered." || res.Thinking != "The customer asks about ORD-1042; check delivery first." {
		t.Errorf("text %q, thinking %q: want the answer and the reasoning apart", res.Text, res.Thinking)
	}
	if want := (runtime.Usage{InputTokens: 20, OutputTokens: 12}); res.Usage != want {
		t.Errorf("usage = %+v, want %+v", res.Usage, want)
	}
}
