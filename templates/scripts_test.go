package templates

import (
	"slices"
	"testing"

	"golang.org/x/net/html"

	"github.com/turnstile-dev/turnstile/templates/htmltest"
)

// TestScripts: every page loads enhance.js first and each page script
// after it, all as deferred files under /static/ (deferred scripts run in
// document order, and the page scripts use what enhance.js defines; the
// Content-Security-Policy allows no inline script).
func TestScripts(t *testing.T) {
	for _, tc := range []struct {
		name string
		page func() *html.Node
		want []string
	}{
		{"login", func() *html.Node { _, doc := htmltest.Render(t, Login(LoginPage{})); return doc },
			[]string{"/static/enhance.js", "/static/feed.js", "/static/inbox.js"}},
		{"error", func() *html.Node { _, doc := htmltest.Render(t, Error(ErrorPage{Status: 404})); return doc },
			[]string{"/static/enhance.js", "/static/feed.js", "/static/inbox.js"}},
		{"inbox with the bulk form", func() *html.Node {
			_, doc := htmltest.Render(t, Inbox(InboxPage{Page: samplePage(), Now: now, Total: 1, Bulk: true}))
			return doc
		}, []string{"/static/enhance.js", "/static/feed.js", "/static/inbox.js", "/static/bulk.js"}},
		{"playground", func() *html.Node {
			_, doc := htmltest.Render(t, Playground(PlaygroundPage{Page: samplePage()}))
			return doc
		}, []string{"/static/enhance.js", "/static/feed.js", "/static/inbox.js", "/static/playground.js", "/static/cancel.js"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, s := range htmltest.FindAll(tc.page(), htmltest.Is("script")) {
				src, _ := htmltest.Attr(s, "src")
				got = append(got, src)
				if _, ok := htmltest.Attr(s, "defer"); !ok {
					t.Errorf("script %q is not deferred", src)
				}
				if typ, ok := htmltest.Attr(s, "type"); ok {
					t.Errorf("script %q has type %q: the scripts are classic", src, typ)
				}
				if s.FirstChild != nil {
					t.Errorf("script %q has inline content", src)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("scripts in order: got %q, want %q", got, tc.want)
			}
		})
	}
}
