package web_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestStaticScripts: every script under web/static is served as written,
// as JavaScript, with the same caching headers as the style sheet.
func TestStaticScripts(t *testing.T) {
	a := newApp(t, 0)
	c := a.visitor(t)
	style, _ := c.get("/static/style.css")
	scripts, err := filepath.Glob("static/*.js")
	if err != nil || len(scripts) == 0 {
		t.Fatalf("no scripts under static/: %v", err)
	}
	for _, path := range scripts {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		res, body := c.get("/" + path)
		if res.StatusCode != 200 || body != string(want) {
			t.Errorf("GET /%s: status %d, %d bytes, want 200 and the file's %d", path, res.StatusCode, len(body), len(want))
		}
		if got := res.Header.Get("Content-Type"); got != "text/javascript; charset=utf-8" {
			t.Errorf("GET /%s: Content-Type %q", path, got)
		}
		for _, h := range []string{"Cache-Control", "ETag", "Last-Modified", "X-Content-Type-Options"} {
			if got, want := res.Header.Get(h), style.Header.Get(h); got != want {
				t.Errorf("GET /%s: %s %q, the style sheet's %q", path, h, got, want)
			}
		}
	}
}

// TestBrowserReadsNDJSONLines runs enhance.js's line reader, which every
// page script streams with, on bodies cut where a network may cut them:
// a line across chunks, a character across chunks, a last line without a
// newline, lines that are not JSON objects; then a reader that stops
// early, and a stream that breaks.
func TestBrowserReadsNDJSONLines(t *testing.T) {
	a := newApp(t, 0)
	b := openTab(t, a, true)
	b.signIn("owner")
	got := get(b, "read NDJSON bodies", chromedp.Evaluate[string](`(async () => {
		const E = window.enhance;
		const bytes = (s) => new TextEncoder().encode(s);
		const body = (chunks, opts) => {
			const o = opts || {};
			return new Response(new ReadableStream({
				pull(c) {
					if (chunks.length) { c.enqueue(chunks.shift()); return; }
					if (o.fail) c.error(new Error('cut')); else c.close();
				},
				cancel() { o.cancelled = true; }
			}));
		};
		const e = bytes('{"c":"é"}');
		const out = {};

		const seen = [];
		out.whole = await E.readLines(body([bytes('{"a":1}\n{"b":'), bytes('2}\n\n  \nnot json\n5\nnull\n"x"\n'),
			e.slice(0, 7), e.slice(7)]), (m) => { seen.push(m); return false; });
		out.seen = seen;

		const stop = { }, upTo = [];
		out.stopped = await E.readLines(body([bytes('{"n":1}\n{"n":2}\n{"n":3}\n'), bytes('{"n":4}\n')], stop),
			(m) => { upTo.push(m.n); return m.n === 2; });
		out.upTo = upTo;
		out.cancelled = stop.cancelled === true;

		const cut = [];
		try {
			await E.readLines(body([bytes('{"n":1}\n{"n"')], { fail: true }), (m) => { cut.push(m.n); return false; });
			out.cut = 'resolved';
		} catch (err) {
			out.cut = 'rejected';
		}
		out.beforeCut = cut;
		return JSON.stringify(out);
	})()`, chromedp.EvalAwaitPromise))
	var res struct {
		Whole     bool             `json:"whole"`
		Seen      []map[string]any `json:"seen"`
		Stopped   bool             `json:"stopped"`
		UpTo      []int            `json:"upTo"`
		Cancelled bool             `json:"cancelled"`
		Cut       string           `json:"cut"`
		BeforeCut []int            `json:"beforeCut"`
	}
	if err := json.Unmarshal([]byte(got), &res); err != nil {
		t.Fatalf("%s: %v", got, err)
	}
	want := []map[string]any{{"a": 1.0}, {"b": 2.0}, {"c": "é"}}
	if res.Whole || !reflect.DeepEqual(res.Seen, want) {
		t.Errorf("a whole body: resolved %v with %v, want false with %v", res.Whole, res.Seen, want)
	}
	if !res.Stopped || !reflect.DeepEqual(res.UpTo, []int{1, 2}) || !res.Cancelled {
		t.Errorf("a reader that stops at n=2: resolved %v after %v, body cancelled %v; want true after [1 2], cancelled",
			res.Stopped, res.UpTo, res.Cancelled)
	}
	if res.Cut != "rejected" || !reflect.DeepEqual(res.BeforeCut, []int{1}) {
		t.Errorf("a broken stream: %s after %v, want rejected after [1]", res.Cut, res.BeforeCut)
	}
}
