package openai

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
)

// answer replies with a status and a body given inline.
func answer(code int, contentType, body string) reply {
	return func(t *testing.T, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

// TestStatusErrorsSayWhatToDo: every refusal by status reads as what a
// person can act on, with the provider's words after it, never the key,
// and stays a *StatusError with its status and code.
func TestStatusErrorsSayWhatToDo(t *testing.T) {
	tests := []struct {
		name     string
		reply    reply
		want     string
		status   int
		code     string
		requests int
	}{
		{"401 with the key echoed", status(http.StatusUnauthorized, "401.json"),
			"openai: the model endpoint refused the API key (401): Incorrect API key provided: [redacted]. " +
				"You can find your API key at https://platform.openai.com/account/api-keys.",
			401, "invalid_api_key", 1},
		{"403 without access to the model", status(http.StatusForbidden, "403.json"),
			`openai: the model endpoint does not let this API key use model "gpt-4o-mini" (403): ` +
				"Project `proj_Zq1` does not have access to model `gpt-4o-mini`",
			403, "model_not_found", 1},
		{"403 of another kind", answer(http.StatusForbidden, "application/json",
			`{"error":{"message":"Country, region, or territory not supported","code":"unsupported_country_region_territory"}}`),
			"openai: the model endpoint refused the API key (403): Country, region, or territory not supported",
			403, "unsupported_country_region_territory", 1},
		{"404 of an unknown model", status(http.StatusNotFound, "404.json"),
			`openai: the model endpoint has no model "gpt-4o-mini" (404): ` +
				"The model `gpt-4o-mini` does not exist or you do not have access to it.",
			404, "model_not_found", 1},
		{"404 of a wrong base URL", answer(http.StatusNotFound, "text/plain", "404 page not found\n"),
			`openai: the model endpoint has no model "gpt-4o-mini", or its base URL is wrong (404)`,
			404, "", 1},
		{"429 after its retries", status(http.StatusTooManyRequests, "429.json"),
			"openai: the model endpoint is limiting the rate of requests (429): Rate limit reached for gpt-4o-mini " +
				"in organization org-Zq1 on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.",
			429, "rate_limit_exceeded", 3},
		{"429 of a used-up quota", status(http.StatusTooManyRequests, "429_quota.json"),
			"openai: the model endpoint says the API key's quota is used up (429): " +
				"You exceeded your current quota, please check your plan and billing details.",
			429, "insufficient_quota", 3},
		{"400", answer(http.StatusBadRequest, "application/json",
			`{"error":{"message":"Invalid 'messages[1].content': string too long.","code":"string_above_max_length"}}`),
			"openai: the model endpoint rejected the request (400): Invalid 'messages[1].content': string too long.",
			400, "string_above_max_length", 1},
		{"500", status(http.StatusInternalServerError, "500.json"),
			"openai: the model endpoint failed (HTTP 500): The server had an error while processing your request. Sorry about that!",
			500, "", 3},
		{"502 of a proxy, with a page for a body", answer(http.StatusBadGateway, "text/html",
			"<html><body><h1>502 Bad Gateway</h1></body></html>"),
			"openai: the model endpoint failed (HTTP 502)", 502, "", 3},
		{"418", answer(http.StatusTeapot, "application/json", `{"error":{"message":"short and stout"}}`),
			"openai: the model endpoint refused the request (HTTP 418 I'm a teapot): short and stout", 418, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t, tt.reply)
			_, _, err := round(t, f.provider(t), request)
			if err == nil {
				t.Fatal("Round succeeded, want an error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error = %q\nwant      %q", got, tt.want)
			}
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *StatusError", err)
			}
			if se.StatusCode != tt.status || se.Code != tt.code || se.Model != "gpt-4o-mini" {
				t.Errorf("StatusError = %d %q model %q, want %d %q model gpt-4o-mini", se.StatusCode, se.Code, se.Model, tt.status, tt.code)
			}
			if got := f.requests(); got != tt.requests {
				t.Errorf("requests = %d, want %d", got, tt.requests)
			}
		})
	}
}

// TestUnreachableEndpoint: a refused connection names the endpoint it
// tried and the network's reason, not only "connection refused".
func TestUnreachableEndpoint(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there any more
	p, err := New(Options{APIKey: testKey, BaseURL: "http://" + addr + "/v1", Model: "gpt-4o-mini", MaxRetryDelay: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = round(t, p, request)
	if err == nil {
		t.Fatal("Round succeeded, want an error")
	}
	want := "openai: the model endpoint http://" + addr + " cannot be reached: "
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error = %q, want it to start %q and say the connection was refused", err, want)
	}
	var se *StatusError
	if errors.As(err, &se) {
		t.Errorf("error %v is a StatusError; no endpoint answered", err)
	}
}
