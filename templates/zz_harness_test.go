package templates

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"
)

func TestHarness(t *testing.T) {
	addr := os.Getenv("HARNESS_ADDR")
	if addr == "" {
		t.Skip()
	}
	var mu sync.Mutex
	var log []string
	rec := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	runs := []InboxRun{
		{ID: 1, Configuration: "stream", Kind: "approval", Digest: "d1", WaitingSince: time.Now()},
		{ID: 2, Configuration: "refuse", Kind: "approval", Digest: "d2", WaitingSince: time.Now()},
		{ID: 3, Configuration: "invalid", Kind: "input", Digest: "d3", WaitingSince: time.Now(),
			Fields: []Field{{Name: "action", Type: "string"}, {Name: "submit", Type: "integer"}}},
		{ID: 4, Configuration: "broken", Kind: "approval", Digest: "d4", WaitingSince: time.Now()},
		{ID: 5, Configuration: "forbidden", Kind: "approval", Digest: "d5", WaitingSince: time.Now()},
	}
	page := func(w http.ResponseWriter, status int, flash string, rs []InboxRun) {
		var b bytes.Buffer
		Inbox(InboxPage{Page: Page{Title: "Inbox", User: &User{Name: "u"}, CSRF: "tok", Flash: flash}, Runs: rs, Now: time.Now()}).Render(context.Background(), &b)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		w.Write(b.Bytes())
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServer(http.Dir("../web/static"))))
	mux.HandleFunc("GET /inbox", func(w http.ResponseWriter, r *http.Request) { rec("GET /inbox"); page(w, 200, "", runs) })
	mux.HandleFunc("GET /log", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range log {
			fmt.Fprintln(w, l)
		}
		log = nil
	})
	mux.HandleFunc("POST /inbox/runs/{id}/{what}", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		rec(fmt.Sprintf("POST %s accept=%q form=%v", r.URL.Path, r.Header.Get("Accept"), r.PostForm))
		ndjson := r.Header.Get("Accept") == "application/x-ndjson"
		switch r.PathValue("id") {
		case "1":
			w.Header().Set("Content-Type", "application/x-ndjson; charset=utf-8")
			fl := http.NewResponseController(w)
			for i, l := range []string{`{"type":"progress","steps":0}`, `{"type":"progress","steps":1}`, `{"type":"keepalive","steps":1}`, `{"type":"progress","steps":2}`, `{"type":"settled"}`} {
				if i > 0 {
					time.Sleep(400 * time.Millisecond)
				}
				fmt.Fprint(w, l+"\n")
				fl.Flush()
			}
		case "2":
			http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		case "3":
			rs := []InboxRun{runs[2]}
			rs[0].Fields = []Field{{Name: "action", Type: "string", Value: r.PostForm.Get("action"), Error: "bad"}, {Name: "submit", Type: "integer", Value: r.PostForm.Get("submit")}}
			page(w, 422, fmt.Sprintf("native=%v", !ndjson), rs)
		case "4":
			w.Header().Set("Content-Type", "application/x-ndjson; charset=utf-8")
			fmt.Fprint(w, `{"type":"progress","steps":0}`+"\n"+`{"type":"prog`)
			http.NewResponseController(w).Flush()
			time.Sleep(300 * time.Millisecond)
			panic(http.ErrAbortHandler)
		case "5":
			w.WriteHeader(403)
			fmt.Fprintf(w, "<!doctype html><title>403</title><p id=forbidden>native=%v decision=%s", !ndjson, r.PostForm["decision"])
		}
	})
	srv := &http.Server{Addr: addr, Handler: mux}
	srv.ListenAndServe()
}
