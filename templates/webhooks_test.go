package templates

import (
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/templates/htmltest"
)

// TestRunDetailFailedDeliveries: the run page lists each failed
// notification it is given, in order, with its endpoint, attempts and last
// answer escaped; given none it has no section at all.
func TestRunDetailFailedDeliveries(t *testing.T) {
	p := RunPage{Page: samplePage(), Run: RunSummary{ID: 42, Status: "completed"}, FailedDeliveries: []FailedDelivery{
		{ID: 7, Event: "run.waiting", Target: "https://hooks.example.com", Attempts: 17, Last: "503: <b>down</b>", CreatedAt: now},
		{ID: 9, Event: "run.settled", Target: "https://hooks.example.org:8443", Attempts: 16, Last: "timeout after 10s", CreatedAt: now},
	}}
	out, doc := htmltest.Render(t, RunDetail(p))
	section := htmltest.One(t, doc, "failed deliveries", htmltest.Is("section", "data-testid", "failed-deliveries"))
	rows := htmltest.FindAll(section, htmltest.Is("tr", "data-testid", "failed-delivery"))
	if len(rows) != 2 {
		t.Fatalf("rows: got %d, want 2", len(rows))
	}
	for i, want := range []struct{ id, target, attempts, last string }{
		{"7", "https://hooks.example.com", "17", "503: <b>down</b>"},
		{"9", "https://hooks.example.org:8443", "16", "timeout after 10s"},
	} {
		htmltest.WantAttr(t, rows[i], "data-delivery-id", want.id)
		for key, v := range map[string]string{"delivery-target": want.target, "delivery-attempts": want.attempts, "delivery-last": want.last} {
			if got := htmltest.Text(htmltest.One(t, rows[i], key, htmltest.Is("td", "data-testid", key))); got != v {
				t.Errorf("row %d %s: got %q, want %q", i, key, got, v)
			}
		}
	}
	if strings.Contains(out, "<b>down</b>") {
		t.Error("a receiver's error is not escaped")
	}

	p.FailedDeliveries = nil
	_, doc = htmltest.Render(t, RunDetail(p))
	htmltest.None(t, doc, "failed deliveries", htmltest.Is("", "data-testid", "failed-deliveries"))
}
