package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// StatusError is a request the endpoint refused with an HTTP status, after
// the retries that status allows.
type StatusError struct {
	StatusCode int
	// Model is the provider's model (the one every configuration's rounds
	// ask for): a 404 usually means the endpoint has none of that name.
	Model string
	// Code is the provider's error code ("invalid_api_key",
	// "model_not_found", "insufficient_quota"), if it gave one.
	Code string
	// Message is the provider's own explanation, if it gave one.
	Message string
}

// Error says what a person can do about the refusal, then the provider's
// own words: "openai: the model endpoint refused the API key (401):
// Incorrect API key provided: [redacted]." It never holds the key: failure
// redacts it from the provider's words when it builds the error.
func (e *StatusError) Error() string {
	s := "openai: " + e.cause()
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// cause is the refusal in words, by its status.
func (e *StatusError) cause() string {
	code := e.StatusCode
	switch {
	case code == http.StatusForbidden && e.Code == "model_not_found":
		// OpenAI's answer to a project without access to the model.
		return fmt.Sprintf("the model endpoint does not let this API key use model %q (403)", e.Model)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Sprintf("the model endpoint refused the API key (%d)", code)
	case code == http.StatusNotFound && e.Code == "model_not_found":
		return fmt.Sprintf("the model endpoint has no model %q (404)", e.Model)
	case code == http.StatusNotFound:
		// A wrong base URL is a 404 too, and reads the same from here
		// unless the endpoint says which.
		return fmt.Sprintf("the model endpoint has no model %q, or its base URL is wrong (404)", e.Model)
	case code == http.StatusTooManyRequests && e.Code == "insufficient_quota":
		return "the model endpoint says the API key's quota is used up (429)"
	case code == http.StatusTooManyRequests:
		return "the model endpoint is limiting the rate of requests (429)"
	case code == http.StatusBadRequest:
		return "the model endpoint rejected the request (400)"
	case code >= 500:
		return fmt.Sprintf("the model endpoint failed (HTTP %d)", code)
	}
	if t := http.StatusText(code); t != "" {
		return fmt.Sprintf("the model endpoint refused the request (HTTP %d %s)", code, t)
	}
	return fmt.Sprintf("the model endpoint refused the request (HTTP %d)", code)
}

// ChunkError is a stream chunk that is not JSON: Index counts the chunks
// of the stream from 1, Offset is the byte of the chunk's data at which
// it stopped being JSON. The JSON parser's own error is its Unwrap.
type ChunkError struct {
	Index  int
	Offset int64
	err    error
}

// Error reads "openai: the model endpoint sent a chunk that is not JSON
// (chunk 3, byte 17)".
func (e *ChunkError) Error() string {
	return fmt.Sprintf("openai: the model endpoint sent a chunk that is not JSON (chunk %d, byte %d)", e.Index, e.Offset)
}

func (e *ChunkError) Unwrap() error { return e.err }

var (
	// errRoundTimeout is the cause of a round's own deadline, which tells it
	// apart from the caller's.
	errRoundTimeout = errors.New("openai: round timeout")
	errCut          = errors.New("the stream ended before [DONE]")
)

// failure explains why a round failed: ctx is the caller's context, rctx
// the round's, and chunk the index of the chunk being read.
func (p *Provider) failure(ctx, rctx context.Context, err error, chunk int) error {
	var apiErr *sdk.Error
	var urlErr *url.Error
	var streamErr *ssestream.StreamError
	var syntaxErr *json.SyntaxError
	switch {
	case ctx.Err() != nil:
		err = fmt.Errorf("openai: %w", ctx.Err())
	case errors.Is(context.Cause(rctx), errRoundTimeout):
		err = fmt.Errorf("openai: no complete reply within %s: %w", p.timeout, context.DeadlineExceeded)
	case errors.As(err, &apiErr):
		// Redacted here so that the error stays a *StatusError for callers
		// that ask for its status.
		err = &StatusError{StatusCode: apiErr.StatusCode, Model: p.model, Code: apiErr.Code, Message: p.redact(apiErr.Message)}
	case errors.As(err, &streamErr):
		err = fmt.Errorf("openai: the stream reported an error: %s", streamMessage(streamErr))
	case errors.Is(err, errCut), errors.Is(err, io.ErrUnexpectedEOF):
		err = fmt.Errorf("openai: the stream broke off: %w", err)
	case errors.As(err, &syntaxErr):
		// The parser's "invalid character …" alone does not say that the
		// endpoint, not Turnstile, broke the format, nor where.
		err = &ChunkError{Index: chunk, Offset: syntaxErr.Offset, err: err}
	case errors.As(err, &urlErr):
		// The URL names the endpoint, never the key (a header carries it);
		// the net error alone ("connection refused") does not say where.
		err = fmt.Errorf("openai: the model endpoint %s cannot be reached: %w", endpoint(urlErr.URL), urlErr.Err)
	default:
		err = fmt.Errorf("openai: %w", err)
	}
	return p.clean(err)
}

// endpoint is the scheme and host of a request's URL, without its path or
// any user info.
func endpoint(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unknown address)"
	}
	return u.Scheme + "://" + u.Host
}

// streamMessage is the message of an error event inside a stream, or the
// event's data when it has none.
func streamMessage(e *ssestream.StreamError) string {
	var ev struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(e.Event.Data, &ev) == nil && ev.Error.Message != "" {
		return ev.Error.Message
	}
	return strings.TrimSpace(string(e.Event.Data))
}

// clean makes sure that no error leaves the provider with the key in it:
// some endpoints echo the key they refused ("Incorrect API key provided:
// sk-…"), and errors end up on pages and in logs.
func (p *Provider) clean(err error) error {
	if err == nil || p.key == "" || !strings.Contains(err.Error(), p.key) {
		return err
	}
	return errors.New(p.redact(err.Error()))
}

// redact replaces the key in s.
func (p *Provider) redact(s string) string {
	if p.key == "" {
		return s
	}
	return strings.ReplaceAll(s, p.key, "[redacted]")
}

// doneWatcher notes whether a response's SSE body carried the data: [DONE]
// line. The SDK's stream ends without an error both at [DONE] and when the
// body simply ends (a proxy that closes an upstream cleanly, say), and only
// the first is a complete reply.
type doneWatcher struct {
	body *doneReader
}

// middleware wraps the body of each attempt; the last attempt's is the one
// the stream reads. The SDK runs attempts on the caller's goroutine, before
// the stream is read, so no lock is needed.
func (w *doneWatcher) middleware(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	if err == nil && res != nil && res.Body != nil {
		w.body = &doneReader{ReadCloser: res.Body}
		res.Body = w.body
	}
	return res, err
}

func (w *doneWatcher) sawDone() bool { return w.body != nil && w.body.done }

// maxLine is how much of a line doneReader keeps: enough to recognise
// "data: [DONE]".
const maxLine = 16

type doneReader struct {
	io.ReadCloser
	line []byte
	done bool
}

func (r *doneReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	for _, c := range b[:n] {
		if r.done {
			break
		}
		if c == '\n' || c == '\r' {
			r.done = isDone(r.line)
			r.line = r.line[:0]
			continue
		}
		if len(r.line) < maxLine {
			r.line = append(r.line, c)
		}
	}
	return n, err
}

// isDone reports whether an SSE line is the data field [DONE], read the way
// the SDK's decoder reads it.
func isDone(line []byte) bool {
	s, ok := strings.CutPrefix(string(line), "data:")
	if !ok {
		return false
	}
	return strings.HasPrefix(strings.TrimPrefix(s, " "), "[DONE]")
}
