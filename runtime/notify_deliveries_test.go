package runtime_test

import (
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestDeliveryTarget: people see a webhook's scheme and host only; its
// path, query and user part may be the credential (a Slack URL is).
func TestDeliveryTarget(t *testing.T) {
	for url, want := range map[string]string{
		"https://hooks.slack.com/services/T000/B000/XXXX": "https://hooks.slack.com",
		"https://hooks.example.com:8443/t?token=s3cret#x": "https://hooks.example.com:8443",
		"https://user:s3cret@hooks.example.com/t":         "https://hooks.example.com",
		"http://[::1]:9000/hook":                          "http://[::1]:9000",
		"HTTPS://Hooks.Example.COM/T":                     "https://hooks.example.com",
		"not a url with s3cret":                           "(not an http or https URL)",
		"ftp://files.example.com/s3cret":                  "(not an http or https URL)",
	} {
		if got := (runtime.DeliveryInfo{URL: url}).Target(); got != want {
			t.Errorf("Target of %q = %q, want %q", url, got, want)
		}
	}
}
