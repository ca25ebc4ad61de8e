package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/turnstile-dev/turnstile/runtime/outbox"
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

// countingReceiver answers 204 and counts the connections it accepts.
type countingReceiver struct {
	*httptest.Server
	conns atomic.Int32
}

func newCountingReceiver(t *testing.T) *countingReceiver {
	t.Helper()
	rc := &countingReceiver{}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	rc.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rc.conns.Add(1)
		}
	}
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

func (rc *countingReceiver) port() string {
	_, port, _ := net.SplitHostPort(rc.Listener.Addr().String())
	return port
}

// TestPrivateTargetsAreNotDialled: without AllowPrivate, a notification
// to a loopback, link-local, private or unspecified address, or to a
// name of this host, is refused for good before any connection, and the
// error says why without the address.
func TestPrivateTargetsAreNotDialled(t *testing.T) {
	rc := newCountingReceiver(t)
	s := New(Options{Timeout: time.Second})
	const allow = "; start with --webhook-allow-private to allow it"
	for _, tc := range []struct{ url, want string }{
		{"http://127.0.0.1:" + rc.port() + "/hook", "target refused: a loopback address" + allow},
		{"http://localhost.:" + rc.port() + "/hook", "target refused: a loopback address" + allow},
		{"http://hooks.localhost:" + rc.port() + "/hook", "target refused: a loopback address" + allow},
		{"http://[::ffff:127.0.0.1]:" + rc.port() + "/hook", "target refused: a loopback address" + allow},
		{"http://169.254.169.254/latest/meta-data/", "target refused: a link-local address" + allow},
		{"http://[fe80::1]:8080/hook", "target refused: a link-local address" + allow},
		{"http://10.1.2.3:8080/hook", "target refused: a private address" + allow},
		{"https://192.168.0.10/hook", "target refused: a private address" + allow},
		{"http://172.20.0.1/hook", "target refused: a private address" + allow},
		{"http://100.100.100.200/hook", "target refused: a private address" + allow},
		{"http://[fd00::1]/hook", "target refused: a private address" + allow},
		{"http://0.0.0.0:" + rc.port() + "/hook", "target refused: an unspecified address" + allow},
		{"http://[::]:" + rc.port() + "/hook", "target refused: an unspecified address" + allow},
	} {
		res := s.Send(context.Background(), outbox.Message{ID: "msg_1", URL: tc.url, Body: []byte(`{}`)})
		if res.Err == nil || res.Err.Error() != tc.want || !res.Permanent {
			t.Errorf("Send to %s = %+v (%v), want refused for good: %q", tc.url, res, res.Err, tc.want)
		}
		if n := rc.conns.Load(); n != 0 {
			t.Fatalf("after %s the receiver accepted %d connections, want none", tc.url, n)
		}
	}
}

// fakeResolver answers names from a table and counts the lookups.
type fakeResolver struct {
	addrs   map[string][]netip.Addr
	lookups atomic.Int32
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.lookups.Add(1)
	if a, ok := r.addrs[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestANameIsCheckedOnTheAddressItResolvesTo: a public-looking name that
// resolves to a loopback address (DNS rebinding) is refused on the
// address the dial would use; with AllowPrivate the same name and the
// loopback address go through, to the address resolved.
func TestANameIsCheckedOnTheAddressItResolvesTo(t *testing.T) {
	rc := newCountingReceiver(t)
	res := &fakeResolver{addrs: map[string][]netip.Addr{"hooks.rebind.example": {netip.MustParseAddr("127.0.0.1")}}}
	url := "http://hooks.rebind.example:" + rc.port() + "/hook"
	refused := New(Options{Timeout: time.Second, Resolver: res}).Send(context.Background(),
		outbox.Message{ID: "msg_1", URL: url, Body: []byte(`{}`)})
	if want := "target refused: a loopback address; start with --webhook-allow-private to allow it"; refused.Err == nil || refused.Err.Error() != want || !refused.Permanent {
		t.Errorf("Send to a name of 127.0.0.1 = %+v, want %q", refused, want)
	}
	if n := rc.conns.Load(); n != 0 || res.lookups.Load() == 0 {
		t.Fatalf("the receiver accepted %d connections after %d lookups, want none after at least one", n, res.lookups.Load())
	}

	allowed := New(Options{Timeout: 5 * time.Second, Resolver: res, AllowPrivate: true})
	for i, u := range []string{url, "http://127.0.0.1:" + rc.port() + "/hook", "http://localhost.:" + rc.port() + "/hook"} {
		got := allowed.Send(context.Background(), outbox.Message{ID: "msg_1", URL: u, Body: []byte(`{}`)})
		if got.Err != nil || got.Status != http.StatusNoContent {
			t.Errorf("with AllowPrivate, Send to %s = %+v (%v), want 204", u, got, got.Err)
		}
		if n := rc.conns.Load(); n < 1 || int(n) > i+1 {
			t.Errorf("after %s the receiver accepted %d connections", u, n)
		}
	}
}

// TestTheHostsOwnAddressesAreRefused: every address of this machine's
// interfaces, public ones included, is this host.
func TestTheHostsOwnAddressesAreRefused(t *testing.T) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip(err)
	}
	s := New(Options{Timeout: time.Second})
	for _, ia := range addrs {
		n, ok := ia.(*net.IPNet)
		if !ok {
			continue
		}
		a, _ := netip.AddrFromSlice(n.IP)
		u := "http://" + netip.AddrPortFrom(a.Unmap(), 9).String() + "/hook"
		got := s.Send(context.Background(), outbox.Message{ID: "msg_1", URL: u, Body: []byte(`{}`)})
		if got.Err == nil || !strings.HasPrefix(got.Err.Error(), "target refused: ") || !got.Permanent {
			t.Errorf("Send to this host's %s = %+v (%v), want refused", u, got, got.Err)
		}
	}
}

func TestClassify(t *testing.T) {
	for addr, want := range map[string]string{
		"8.8.8.8":            "",
		"2606:4700::1111":    "",
		"93.184.216.34":      "",
		"127.0.0.2":          "a loopback address",
		"::1":                "a loopback address",
		"::ffff:127.0.0.1":   "a loopback address",
		"0.0.0.0":            "an unspecified address",
		"0.1.2.3":            "an unspecified address",
		"::":                 "an unspecified address",
		"169.254.169.254":    "a link-local address",
		"fe80::1%eth0":       "a link-local address",
		"10.0.0.1":           "a private address",
		"172.31.255.255":     "a private address",
		"192.168.1.1":        "a private address",
		"100.64.0.1":         "a private address",
		"fd12:3456::1":       "a private address",
		"fec0::1":            "a private address",
		"64:ff9b::a00:1":     "a private address", // 10.0.0.1 through NAT64
		"64:ff9b::808:808":   "",                  // 8.8.8.8 through NAT64
		"::ffff:169.254.1.1": "a link-local address",
		"255.255.255.255":    "a reserved address",
		"240.0.0.1":          "a reserved address",
		"239.1.1.1":          "a reserved address",
		"198.18.0.1":         "a reserved address",
	} {
		if got := classify(netip.MustParseAddr(addr)); got != want {
			t.Errorf("classify(%s) = %q, want %q", addr, got, want)
		}
	}
}

// TestTheHostsOwnNameIsRefused: this machine's host name resolves to one
// of its own addresses, which counts as private.
func TestTheHostsOwnNameIsRefused(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	if _, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", host); err != nil {
		t.Skipf("the host name %s does not resolve here: %v", host, err)
	}
	rc := newCountingReceiver(t)
	got := New(Options{Timeout: time.Second}).Send(context.Background(),
		outbox.Message{ID: "msg_1", URL: "http://" + host + ":" + rc.port() + "/hook", Body: []byte(`{}`)})
	if got.Err == nil || !strings.HasPrefix(got.Err.Error(), "target refused: ") || !got.Permanent {
		t.Errorf("Send to the host's own name %s = %+v (%v), want refused", host, got, got.Err)
	}
	if n := rc.conns.Load(); n != 0 {
		t.Errorf("the receiver accepted %d connections, want none", n)
	}
}

// TestASecretOfTurnstileItselfNeverSigns: a delivery row that names one of
// Turnstile's own variables as its secret (written before configurations
// were checked for it) fails for good, without a request.
func TestASecretOfTurnstileItselfNeverSigns(t *testing.T) {
	rc := newCountingReceiver(t)
	s := New(Options{AllowPrivate: true, Getenv: func(string) string { return "k1:c2VjcmV0LXN0YXRlLWtleXMtMzItYnl0ZXMhISE=" }})
	got := s.Send(context.Background(), outbox.Message{ID: "msg_1", URL: rc.URL + "/hook", SecretEnv: "TURNSTILE_STATE_KEYS", Body: []byte(`{}`)})
	if got.Err == nil || !strings.HasPrefix(got.Err.Error(), "secret_env: TURNSTILE_STATE_KEYS is reserved") || !got.Permanent {
		t.Errorf("Send signed with TURNSTILE_STATE_KEYS = %+v (%v), want refused for good", got, got.Err)
	}
	if n := rc.conns.Load(); n != 0 {
		t.Errorf("the receiver accepted %d connections, want none", n)
	}
}
