package web_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/web"
)

// TestSecurityHeaders: every HTML page — signed in or out, an error page
// too — sends a Content-Security-Policy without inline script and with
// frame-ancestors 'none', nosniff and same-origin referrers, and pages and
// JSON answers are not stored in caches.
func TestSecurityHeaders(t *testing.T) {
	a := newApp(t, 0)
	o := a.start(t, "refund", "owner", runtime.OriginInteractive)
	admin := a.signIn(t, "admin")
	visitor := a.visitor(t)
	tests := []struct {
		name    string
		c       *client
		path    string
		noStore bool
	}{
		{"sign-in page", visitor, "/login", true},
		{"404 page, signed out", visitor, "/nowhere", true},
		{"inbox", admin, "/inbox", true},
		{"run page", admin, runPath(o.RunID, ""), true},
		{"playground", admin, "/playground", true},
		{"404 page", admin, "/runs/999999", true},
		{"API run", admin, "/api/runs/" + itoa(o.RunID), true},
		{"style sheet", admin, "/static/style.css", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, _ := tt.c.get(tt.path)
			h := res.Header
			csp := h.Get("Content-Security-Policy")
			for _, want := range []string{"script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "object-src 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("Content-Security-Policy = %q, want it to hold %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("Content-Security-Policy = %q allows inline script or eval", csp)
			}
			if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
			}
			if got := h.Get("Referrer-Policy"); got != "same-origin" {
				t.Errorf("Referrer-Policy = %q, want same-origin", got)
			}
			if got := h.Get("Cache-Control"); (got == "no-store") != tt.noStore {
				t.Errorf("Cache-Control = %q, want no-store: %v", got, tt.noStore)
			}
		})
	}
}

// TestStrictTransportSecurity: a server told it is reached over HTTPS
// sends Strict-Transport-Security for a year (no preload, no
// subdomains: those are the domain owner's choice) on every answer, pages,
// errors, the API and static files; one that is not sends none.
func TestStrictTransportSecurity(t *testing.T) {
	plain := newApp(t, 0)
	https := newApp(t, 0, func(d *web.Deps) { d.StrictTransportSecurity = true })
	for _, tc := range []struct {
		app  *testApp
		want string
	}{{plain, ""}, {https, "max-age=31536000"}} {
		visitor, admin := tc.app.visitor(t), tc.app.signIn(t, "admin")
		for _, r := range []struct {
			c    *client
			path string
		}{{visitor, "/login"}, {visitor, "/nowhere"}, {admin, "/inbox"}, {admin, "/api/runs"}, {admin, "/static/style.css"}} {
			res, _ := r.c.get(r.path)
			if got := res.Header.Get("Strict-Transport-Security"); got != tc.want {
				t.Errorf("GET %s: Strict-Transport-Security %q, want %q", r.path, got, tc.want)
			}
		}
	}
}

// TestBrowserSeesPolicyViolations is the control for the check every
// browser test makes when its tab closes (that the policy blocked
// nothing): a style and a script written into a page by hand are
// blocked, and the tab reports both.
func TestBrowserSeesPolicyViolations(t *testing.T) {
	a := newApp(t, 0)
	b := openTab(t, a, true)
	b.signIn("owner")
	b.do("write inline style and script into the page", stepTimeout,
		chromedp.Evaluate[chromedp.Void](`document.head.appendChild(Object.assign(document.createElement('style'), {textContent: 'body { color: red }'}));
			document.body.appendChild(Object.assign(document.createElement('script'), {textContent: 'window.ran = true'}));`))
	deadline := time.Now().Add(stepTimeout)
	for len(b.violations()) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := b.violations(); len(got) < 2 {
		t.Fatalf("violations reported: %q, want the style's and the script's", got)
	}
	if ran := get(b, "read window.ran", chromedp.Evaluate[bool](`window.ran === true`)); ran {
		t.Error("the inline script ran")
	}
	b.mu.Lock()
	b.refused = nil // seen: the cleanup check is for what the pages need
	b.mu.Unlock()
}
