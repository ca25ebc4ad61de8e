package templates

import (
	"slices"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/templates/htmltest"
)

// TestRunPageEraseControl: a settled run's page has the Erase button in a
// GET form to the question's page, the in-page question hidden with its
// POST form and CSRF token, and erase.js deferred after the layout's
// scripts; a run that may not be erased has none of it.
func TestRunPageEraseControl(t *testing.T) {
	run := RunSummary{ID: 7, Status: "completed", CanErase: true}
	_, doc := htmltest.Render(t, RunDetail(RunPage{Page: samplePage(), Run: run}))
	open := htmltest.One(t, doc, "the Erase form", htmltest.Is("form", "data-erase-open", "*"))
	if method, _ := htmltest.Attr(open, "method"); method != "get" {
		t.Errorf("the Erase button's form is %q, want get (it only opens the question)", method)
	}
	if action, _ := htmltest.Attr(open, "action"); action != "/runs/7/erase" {
		t.Errorf("the Erase button opens %q", action)
	}
	box := htmltest.One(t, doc, "the in-page question", htmltest.Is("div", "data-testid", "erase-confirm"))
	if _, hidden := htmltest.Attr(box, "hidden"); !hidden {
		t.Error("the in-page question is not hidden")
	}
	form := htmltest.One(t, box, "the erase form", htmltest.Is("form", "action", "/runs/7/erase", "method", "post"))
	htmltest.One(t, form, "its CSRF token", htmltest.Is("input", "name", "csrf_token", "value", "tok-123"))
	var scripts []string
	for _, s := range htmltest.FindAll(doc, htmltest.Is("script")) {
		src, _ := htmltest.Attr(s, "src")
		if _, ok := htmltest.Attr(s, "defer"); !ok {
			t.Errorf("script %q is not deferred", src)
		}
		scripts = append(scripts, src)
	}
	if want := []string{"/static/enhance.js", "/static/feed.js", "/static/inbox.js", "/static/erase.js"}; !slices.Equal(scripts, want) {
		t.Errorf("scripts = %q, want %q", scripts, want)
	}

	run.CanErase = false
	_, doc = htmltest.Render(t, RunDetail(RunPage{Page: samplePage(), Run: run}))
	htmltest.None(t, doc, "an erase control", htmltest.Is("", "data-erase", "*"))
	htmltest.None(t, doc, "erase.js", htmltest.Is("script", "src", "/static/erase.js"))
}

// TestEraseConfirmPage: the question's page says it cannot be undone and
// what stays, posts with the CSRF token and leads back to the run.
func TestEraseConfirmPage(t *testing.T) {
	_, doc := htmltest.Render(t, EraseConfirm(ErasePage{Page: samplePage(), RunID: 7}))
	q := htmltest.Text(htmltest.One(t, doc, "the question", htmltest.Is("p", "data-testid", "erase-question")))
	if !strings.Contains(q, "cannot be undone") || !strings.Contains(q, "Who decided what, and when, stays") {
		t.Errorf("the question says %q", q)
	}
	form := htmltest.One(t, doc, "the erase form", htmltest.Is("form", "action", "/runs/7/erase", "method", "post"))
	htmltest.One(t, form, "its CSRF token", htmltest.Is("input", "name", "csrf_token", "value", "tok-123"))
	htmltest.One(t, form, "the way back", htmltest.Is("a", "href", "/runs/7"))
}
