// Package openai is the provider for OpenAI's chat completions API and any
// endpoint compatible with it (a base URL and a key), through openai-go. A
// round is one streamed completion: text deltas go to the caller as they
// arrive, parallel tool calls are reassembled by index, and usage is asked
// for in the stream.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TypeOpenAI is the ProviderSpec.Type of this provider.
const TypeOpenAI = "openai"

// DefaultAPIKeyEnv is the environment variable that holds the key when a
// configuration names none.
const DefaultAPIKeyEnv = "OPENAI_API_KEY"

// DefaultBaseURL is OpenAI's own endpoint, used when a configuration names
// no base URL.
const DefaultBaseURL = "https://api.openai.com/v1/"

// DefaultTimeout bounds one round, all its attempts and waits included.
const DefaultTimeout = 120 * time.Second

// MaxRetries is how often a request that failed with 408, 409, 429, a 5xx
// or a broken connection is repeated, with exponential backoff (0.5 s, 1 s,
// with jitter) or as the server's Retry-After asks: three attempts in all.
// A stream that broke after its response began is not repeated, since its
// deltas have already been delivered.
const MaxRetries = 2

// Options configure a provider.
type Options struct {
	// APIKey is sent as a bearer token; required.
	APIKey string
	// BaseURL is the endpoint, up to and including /v1; DefaultBaseURL when
	// empty.
	BaseURL string
	// Model is used when a round's request names none; required.
	Model string
	// Timeout bounds each round; DefaultTimeout when zero.
	Timeout time.Duration
	// MaxRetryDelay caps the wait between attempts; the SDK's (8 s for its
	// own backoff, 2 min for a server's Retry-After) when zero. A server that
	// asks for a longer wait gets no retry.
	MaxRetryDelay time.Duration
	// HTTPClient sends the requests; http.DefaultClient when nil.
	HTTPClient *http.Client
}

// Provider talks to one endpoint with one key. It keeps no state between
// rounds, so one provider may serve many runs at once.
type Provider struct {
	chat    sdk.ChatCompletionService
	model   string
	key     string
	timeout time.Duration
}

var _ runtime.Provider = (*Provider)(nil)

// New returns a provider for opts. It fails without a key or a model, and
// with a base URL that is not an http or https URL; the error never holds
// the key.
func New(opts Options) (*Provider, error) {
	p, err := build(opts)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	return p, nil
}

func build(opts Options) (*Provider, error) {
	if opts.APIKey == "" {
		return nil, errors.New("no API key")
	}
	if opts.Model == "" {
		return nil, errors.New("no model")
	}
	base := opts.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	if u, err := url.Parse(base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("base URL %q is not an http or https URL", base)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	// The service is built without sdk.NewClient so that no OPENAI_*
	// variable of the process (a base URL, an organization, extra headers)
	// leaks into a configuration that names its own endpoint and key.
	ro := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithAPIKey(opts.APIKey),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(MaxRetries),
	}
	if opts.MaxRetryDelay > 0 {
		ro = append(ro, option.WithMaxRetryDelay(opts.MaxRetryDelay))
	}
	return &Provider{
		chat:    sdk.NewChatCompletionService(ro...),
		model:   opts.Model,
		key:     opts.APIKey,
		timeout: timeout,
	}, nil
}

// Factory builds the provider of a configuration whose provider type is
// "openai": its model and base URL, and its key from the environment
// variable the configuration names (DefaultAPIKeyEnv when it names none).
// Another type, a missing model, a variable runtime.CheckEnvName refuses or
// an unset one is an error naming the configuration and the variable, never
// a value.
func Factory(cfg *runtime.Configuration) (runtime.Provider, error) {
	if cfg == nil {
		return nil, errors.New("openai: no configuration")
	}
	spec := cfg.Provider
	if spec.Type != TypeOpenAI {
		return nil, fmt.Errorf("openai: configuration %s: provider type %q is not %q", cfg.Identifier, spec.Type, TypeOpenAI)
	}
	if spec.Model == "" {
		return nil, fmt.Errorf("openai: configuration %s: the provider needs a model", cfg.Identifier)
	}
	env := spec.APIKeyEnv
	if env == "" {
		env = DefaultAPIKeyEnv
	}
	// Normalize refuses it too; a row stored before that rule must not
	// send Turnstile's own secrets to its base_url either.
	if err := runtime.CheckEnvName(env); err != nil {
		return nil, fmt.Errorf("openai: configuration %s: api_key_env: %w", cfg.Identifier, err)
	}
	key := os.Getenv(env)
	if key == "" {
		return nil, fmt.Errorf("openai: configuration %s: the API key variable %s is not set", cfg.Identifier, env)
	}
	p, err := build(Options{APIKey: key, BaseURL: spec.BaseURL, Model: spec.Model})
	if err != nil {
		return nil, fmt.Errorf("openai: configuration %s: %w", cfg.Identifier, err)
	}
	return p, nil
}

var _ runtime.ProviderFactory = Factory

// Round streams one chat completion. Each text delta goes to onDelta (which
// may be nil) as it arrives, and so does each piece of reasoning a server
// streams as reasoning_content (DeepSeek, vLLM, Ollama and others: a field
// the API does not define, which the SDK keeps among the delta's extra
// fields), as thinking; the reasoning is the result's Thinking. It fails, with an error that names the HTTP
// status and the provider's message but never the key, when the endpoint
// refuses the request after its retries, when the stream breaks off before
// [DONE], when it sends a chunk that is not JSON (a *ChunkError), when a
// tool call comes back without a name or with arguments that are not JSON,
// and when the round outlasts its timeout or ctx ends. Tool parameters are
// sent without "$schema", which some compatible endpoints refuse.
func (p *Provider) Round(ctx context.Context, req runtime.RoundRequest, onDelta func(runtime.Delta)) (runtime.RoundResult, error) {
	params, err := p.params(req)
	if err != nil {
		return runtime.RoundResult{}, p.clean(err)
	}
	rctx, cancel := context.WithTimeoutCause(ctx, p.timeout, errRoundTimeout)
	defer cancel()

	watch := &doneWatcher{}
	stream := p.chat.NewStreaming(rctx, params, option.WithMiddleware(watch.middleware))
	defer stream.Close()

	var acc sdk.ChatCompletionAccumulator
	var thinking strings.Builder
	if onDelta == nil {
		onDelta = func(runtime.Delta) {}
	}
	chunks := 0 // read so far, which locates a malformed one
	for stream.Next() {
		chunks++
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			return runtime.RoundResult{}, p.clean(errors.New("openai: the stream sent a chunk that does not fit the ones before"))
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue
			}
			if r := reasoning(c.Delta); r != "" {
				thinking.WriteString(r)
				onDelta(runtime.Delta{Text: r, Thinking: true})
			}
			if c.Delta.Content != "" {
				onDelta(runtime.Delta{Text: c.Delta.Content})
			}
			if c.Delta.Refusal != "" {
				onDelta(runtime.Delta{Text: c.Delta.Refusal})
			}
		}
	}
	if err := stream.Err(); err != nil {
		return runtime.RoundResult{}, p.failure(ctx, rctx, err, chunks+1)
	}
	if !watch.sawDone() {
		return runtime.RoundResult{}, p.failure(ctx, rctx, errCut, chunks+1)
	}
	res, err := result(req.Round, &acc)
	if err != nil {
		return runtime.RoundResult{}, p.clean(err)
	}
	res.Thinking = thinking.String()
	return res, nil
}

// reasoning is the piece of reasoning a chunk's delta carries as
// reasoning_content (or reasoning, as some servers name it): a JSON
// string, else nothing.
func reasoning(d sdk.ChatCompletionChunkChoiceDelta) string {
	for _, name := range []string{"reasoning_content", "reasoning"} {
		f, ok := d.JSON.ExtraFields[name]
		if !ok || f.Raw() == "" {
			continue
		}
		var s string
		if json.Unmarshal([]byte(f.Raw()), &s) == nil && s != "" {
			return s
		}
	}
	return ""
}
