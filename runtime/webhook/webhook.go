// Package webhook sends the outbox's notifications over HTTP with the
// Standard Webhooks headers and signature (the Standard Webhooks Go
// library signs). It never follows a redirect, reads at most a small part
// of a response, refuses a URL that points at Turnstile itself, and
// connects to no private address unless told to (see target.go).
package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/outbox"
)

// Timeout bounds one attempt, from connecting to the end of the response:
// a receiver slower than this is retried like one that failed.
const Timeout = 10 * time.Second

// maxResponse is how much of a response body is read (and discarded): a
// receiver that answers with a huge body costs no more than this.
const maxResponse = 64 << 10

// SecretPrefix marks a Standard Webhooks secret: whsec_ then the key in
// base64.
const SecretPrefix = "whsec_"

// Options configure a Sender.
type Options struct {
	// Getenv reads the secrets; os.Getenv in production.
	Getenv func(string) string
	// Self are the addresses Turnstile is reached at (its --public-url
	// and its listen address): no notification may be sent there.
	Self []string
	// Timeout bounds one attempt; Timeout when zero.
	Timeout time.Duration
	// Now is the clock of webhook-timestamp; time.Now when nil.
	Now func() time.Time
	// AllowPrivate lets notifications reach loopback, link-local, private,
	// unspecified and reserved addresses and this machine's own
	// (--webhook-allow-private: the demo, tests, a receiver on the same
	// network); without it they fail at once.
	AllowPrivate bool
	// Resolver looks the targets' names up; net.DefaultResolver when nil.
	Resolver Resolver
}

// Sender posts notifications; it is safe for concurrent use.
type Sender struct {
	client *http.Client
	getenv func(string) string
	self   []endpoint
	now    func() time.Time
}

var _ outbox.Sender = (*Sender)(nil)

// New returns a Sender with its own connection pool.
func New(o Options) *Sender {
	if o.Timeout <= 0 {
		o.Timeout = Timeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	tr.ResponseHeaderTimeout = o.Timeout
	// The address checked must be the address reached: through a proxy it
	// would be the proxy's.
	tr.Proxy = nil
	d := &dialer{net: net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}, resolver: o.Resolver, allow: o.AllowPrivate}
	tr.DialContext = d.DialContext
	s := &Sender{getenv: o.Getenv, now: o.Now, client: &http.Client{
		Transport: tr,
		Timeout:   o.Timeout,
		// A 3xx is the receiver's answer, and not a 2xx: a failure. A
		// redirect followed could lead anywhere, Turnstile itself included.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	for _, a := range o.Self {
		if ep, ok := parseSelf(a); ok {
			s.self = append(s.self, ep)
		}
	}
	return s
}

// Send makes one attempt. Errors never name the URL (a Slack webhook's
// URL is its secret) nor the secret. A target refused (a private address
// without AllowPrivate, Turnstile itself, no http(s) URL) or a secret_env
// that names Turnstile's own variable fails for good, without a request.
func (s *Sender) Send(ctx context.Context, m outbox.Message) outbox.SendResult {
	u, err := url.Parse(m.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return outbox.SendResult{Err: errors.New("refused: the URL is not an http or https URL"), Permanent: true}
	}
	if s.isSelf(u) {
		return outbox.SendResult{Err: errors.New("refused: the URL points at Turnstile itself"), Permanent: true}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(m.Body))
	if err != nil {
		return outbox.SendResult{Err: errors.New("refused: the URL does not make a request"), Permanent: true}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Turnstile-Webhooks/1")
	ts := s.now()
	req.Header.Set("webhook-id", m.ID)
	req.Header.Set("webhook-timestamp", fmt.Sprint(ts.Unix()))
	if m.SecretEnv != "" {
		// Configurations refuse them; a row written before that rule must
		// not sign with Turnstile's own secrets either.
		if err := runtime.CheckEnvName(m.SecretEnv); err != nil {
			return outbox.SendResult{Err: fmt.Errorf("secret_env: %w", err), Permanent: true}
		}
		secret := ""
		if s.getenv != nil {
			secret = s.getenv(m.SecretEnv)
		}
		if secret == "" {
			// Retried: whoever runs the workers may yet set it.
			return outbox.SendResult{Err: fmt.Errorf("the secret's environment variable %s is not set", m.SecretEnv)}
		}
		sig, err := Sign(secret, m.ID, ts, m.Body)
		if err != nil {
			return outbox.SendResult{Err: fmt.Errorf("the secret in %s: %w", m.SecretEnv, err), Permanent: true}
		}
		req.Header.Set("webhook-signature", sig)
	}
	resp, err := s.client.Do(req)
	var refused *refusedError
	if errors.As(err, &refused) {
		return outbox.SendResult{Err: refused, Permanent: true}
	}
	if err != nil {
		return outbox.SendResult{Err: describe(err)}
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return outbox.SendResult{Status: resp.StatusCode}
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return outbox.SendResult{Status: resp.StatusCode, Err: fmt.Errorf("HTTP %d: redirects are not followed", resp.StatusCode)}
	default:
		return outbox.SendResult{Status: resp.StatusCode, Err: fmt.Errorf("HTTP %d", resp.StatusCode)}
	}
}

// describe is why a request got no response, without the URL that
// url.Error would repeat.
func describe(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Errorf("no response within the timeout")
		}
		return fmt.Errorf("no response: %w", ue.Err)
	}
	return fmt.Errorf("no response: %w", err)
}

// Key is the signing key of a secret: the base64 after whsec_ for a
// Standard Webhooks secret, else the secret's bytes as they are.
func Key(secret string) ([]byte, error) {
	if rest, ok := strings.CutPrefix(secret, SecretPrefix); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil || len(key) == 0 {
			return nil, errors.New("a whsec_ secret must continue in base64")
		}
		return key, nil
	}
	return []byte(secret), nil
}

// Sign is the webhook-signature header of a message:
// v1,base64(HMAC-SHA256(key, id.timestamp.body)).
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := Key(secret)
	if err != nil {
		return "", err
	}
	wh, err := standardwebhooks.NewWebhookRaw(key)
	if err != nil {
		return "", err
	}
	return wh.Sign(id, ts, body)
}

// endpoint is a host and port that Turnstile answers on; any means the
// listener takes every address of this machine (":8080", "0.0.0.0:8080").
type endpoint struct {
	host, port string
	any        bool
}

// parseSelf reads a URL ("http://turnstile.example") or a listen address
// ("127.0.0.1:8080", ":8080").
func parseSelf(a string) (endpoint, bool) {
	if strings.Contains(a, "://") {
		u, err := url.Parse(a)
		if err != nil || u.Host == "" {
			return endpoint{}, false
		}
		return endpoint{host: strings.ToLower(u.Hostname()), port: portOf(u)}, true
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return endpoint{}, false
	}
	ip := net.ParseIP(host)
	return endpoint{host: strings.ToLower(host), port: port, any: host == "" || (ip != nil && ip.IsUnspecified())}, true
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// isSelf reports whether u names one of Turnstile's own endpoints: the
// same host and port, where a loopback name and a loopback address count
// as the same host, and a listener on every address is reached through
// any loopback or unspecified address. Names are not resolved: the check
// stops the mistakes (a notify URL copied from the inbox's address), not
// a DNS name made to point back here.
func (s *Sender) isSelf(u *url.URL) bool {
	host, port := strings.ToLower(u.Hostname()), portOf(u)
	for _, ep := range s.self {
		if ep.port != port {
			continue
		}
		if host == ep.host || (loopback(host) && (ep.any || loopback(ep.host))) {
			return true
		}
		if ip := net.ParseIP(host); ep.any && ip != nil && ip.IsUnspecified() {
			return true
		}
	}
	return false
}

func loopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
