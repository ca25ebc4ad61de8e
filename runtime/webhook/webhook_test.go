package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

func TestKeyOfASecret(t *testing.T) {
	key, err := Key("whsec_" + base64.StdEncoding.EncodeToString([]byte("sixteen byte key")))
	if err != nil || string(key) != "sixteen byte key" {
		t.Errorf("whsec_ secret's key = %q, %v; want the base64-decoded bytes", key, err)
	}
	if key, err := Key("plain-secret"); err != nil || string(key) != "plain-secret" {
		t.Errorf("plain secret's key = %q, %v; want its bytes", key, err)
	}
	if _, err := Key("whsec_not base64!"); err == nil {
		t.Error("a whsec_ secret that is no base64 was accepted")
	}
}

// A plain secret's signature is HMAC-SHA256 with its bytes, which the
// library's raw-key verifier accepts.
func TestSignWithAPlainSecret(t *testing.T) {
	ts := time.Now()
	body := []byte(`{"type":"run.settled"}`)
	sig, err := Sign("plain-secret", "msg_1", ts, body)
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, []byte("plain-secret"))
	mac.Write([]byte("msg_1." + strconv.FormatInt(ts.Unix(), 10) + "." + string(body)))
	if want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)); sig != want {
		t.Errorf("signature %s, want %s", sig, want)
	}
	wh, err := standardwebhooks.NewWebhookRaw([]byte("plain-secret"))
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {strconv.FormatInt(ts.Unix(), 10)}, "Webhook-Signature": {sig}}
	if err := wh.Verify(body, h); err != nil {
		t.Errorf("library verify: %v", err)
	}
}

func TestIsSelf(t *testing.T) {
	s := New(Options{Self: []string{"https://turnstile.example", "127.0.0.1:8080", ":9090", "not an address"}})
	for _, c := range []struct {
		url  string
		self bool
	}{
		{"https://turnstile.example/hook", true},
		{"https://TURNSTILE.example:443/hook", true},
		{"http://turnstile.example/hook", false}, // port 80, not 443
		{"http://127.0.0.1:8080/inbox", true},
		{"http://localhost:8080/", true},
		{"http://[::1]:8080/", true},
		{"http://127.0.0.1:8081/", false},
		{"http://127.0.0.2:9090/", true}, // a listener on every address
		{"http://0.0.0.0:9090/", true},
		{"http://receiver.example:9090/", false},
		{"https://hooks.slack.com/services/T/B/X", false},
	} {
		u, err := url.Parse(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.isSelf(u); got != c.self {
			t.Errorf("isSelf(%s) = %v, want %v", c.url, got, c.self)
		}
	}
}
