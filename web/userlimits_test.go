package web

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// tokensOf authenticates each token as its user, with every scope.
type tokensOf map[string]*runtime.User

func (ts tokensOf) Authenticate(_ context.Context, plain string) (*runtime.User, []string, error) {
	u, ok := ts[plain]
	if !ok {
		return nil, nil, runtime.ErrTokenInvalid
	}
	return u, runtime.AllScopes(), nil
}

// heldRoute is an API route whose requests stay open until the test lets
// them go, one at a time, per user.
type heldRoute struct {
	t       *testing.T
	server  *Server
	srv     *httptest.Server        // the route, behind s.api
	entered chan int64              // the user of each request the handler got
	gates   map[int64]chan struct{} // a send lets one request of the user finish
	done    chan answered           // every answer, as the client read it
	tokens  map[int64]string        // each user's token
	client  *http.Client            // a connection per request
	waitFor time.Duration           // how long a request may take to arrive or be answered
}

// answered is the answer to one request.
type answered struct {
	user       int64
	status     int
	retryAfter string
	code       string
}

func newHeldRoute(t *testing.T) *heldRoute {
	s := New(Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Sessions: scs.New(),
		Tokens: tokensOf{"tst_alice": {ID: 1, Name: "alice", Role: runtime.RoleUser}, "tst_bob": {ID: 2, Name: "bob", Role: runtime.RoleUser}}})
	h := &heldRoute{t: t, server: s, entered: make(chan int64, 256), done: make(chan answered, 256),
		gates:  map[int64]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})},
		tokens: map[int64]string{1: "tst_alice", 2: "tst_bob"}, waitFor: 10 * time.Second,
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	route := s.api(runtime.ScopeRunRead, func(w http.ResponseWriter, r *http.Request, _ httprouter.Params, actor runtime.Actor) {
		h.entered <- actor.ID
		<-h.gates[actor.ID]
		w.WriteHeader(http.StatusNoContent)
	})
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { route(w, r, nil) }))
	t.Cleanup(func() {
		for _, g := range h.gates {
			close(g)
		}
		h.srv.Close()
	})
	return h
}

// send sends a request of a user, a stream (Accept: application/x-ndjson)
// or not; its answer arrives on h.done.
func (h *heldRoute) send(user int64, stream bool) {
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+"/api/held", nil)
	req.Header.Set("Authorization", "Bearer "+h.tokens[user])
	if stream {
		req.Header.Set("Accept", "application/x-ndjson")
	}
	go func() {
		res, err := h.client.Do(req)
		if err != nil {
			h.done <- answered{user: user, status: -1, code: err.Error()}
			return
		}
		defer res.Body.Close()
		a := answered{user: user, status: res.StatusCode, retryAfter: res.Header.Get("Retry-After")}
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.NewDecoder(res.Body).Decode(&body) == nil {
			a.code = body.Error.Code
		}
		h.done <- a
	}()
}

// wantEntered waits until the handler got a request of the user.
func (h *heldRoute) wantEntered(user int64) {
	h.t.Helper()
	select {
	case got := <-h.entered:
		if got != user {
			h.t.Fatalf("the handler got a request of user %d, want %d", got, user)
		}
	case a := <-h.done:
		h.t.Fatalf("a request of user %d was answered %d %q before the handler got it, want it held open", a.user, a.status, a.code)
	case <-time.After(h.waitFor):
		h.t.Fatalf("no request of user %d reached the handler in %s", user, h.waitFor)
	}
}

// wantAnswer waits for the next answer.
func (h *heldRoute) wantAnswer() answered {
	h.t.Helper()
	select {
	case a := <-h.done:
		return a
	case id := <-h.entered:
		h.t.Fatalf("a request of user %d reached the handler, want it refused before", id)
	case <-time.After(h.waitFor):
		h.t.Fatalf("no answer in %s", h.waitFor)
	}
	return answered{}
}

// TestAPIRequestsPerUser: one user holds at most 32 API requests and,
// apart from them, 64 streams open at once; the next is 429
// too_many_requests with Retry-After and never reaches its handler. The
// other kind, another user, and the same user once one of them finished
// go through, and nothing stays counted once every request ended.
func TestAPIRequestsPerUser(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
		max    int
	}{{"requests", false, 32}, {"streams", true, 64}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHeldRoute(t)
			const alice, bob = 1, 2
			for range tc.max {
				h.send(alice, tc.stream)
				h.wantEntered(alice)
			}

			h.send(alice, tc.stream)
			over := h.wantAnswer()
			if over.status != http.StatusTooManyRequests || over.code != "too_many_requests" {
				t.Fatalf("request %d of one user: %d %q, want 429 too_many_requests", tc.max+1, over.status, over.code)
			}
			if secs, err := strconv.Atoi(over.retryAfter); err != nil || secs < 1 {
				t.Errorf("Retry-After %q, want a number of seconds", over.retryAfter)
			}

			h.send(alice, !tc.stream) // the other kind has a count of its own
			h.wantEntered(alice)
			h.send(bob, tc.stream)
			h.wantEntered(bob)

			h.gates[alice] <- struct{}{} // one of alice's ends…
			if a := h.wantAnswer(); a.user != alice || a.status != http.StatusNoContent {
				t.Fatalf("answer %+v, want alice's 204", a)
			}
			h.send(alice, tc.stream) // …and her next goes through
			h.wantEntered(alice)

			for range tc.max + 1 {
				h.gates[alice] <- struct{}{}
			}
			h.gates[bob] <- struct{}{}
			for range tc.max + 2 {
				if a := h.wantAnswer(); a.status != http.StatusNoContent {
					t.Errorf("answer %+v, want 204", a)
				}
			}
			if n := h.server.openPerUser(); n != 0 {
				t.Errorf("%d users still counted after every request ended, want none", n)
			}
		})
	}
}

// TestUserLimitsBounds: zero takes the defaults, a negative bound none, and
// each user's requests and streams are counted apart.
func TestUserLimitsBounds(t *testing.T) {
	tests := []struct {
		name                   string
		requests, streams      int
		wantRequests, wantStrm int // the most each user gets; -1: no bound within 1,000
	}{
		{"defaults", 0, 0, DefaultMaxUserRequests, DefaultMaxUserStreams},
		{"no bound", -1, -1, -1, -1},
		{"chosen", 2, 3, 2, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newUserLimits(tt.requests, tt.streams)
			for _, c := range []struct {
				stream bool
				want   int
			}{{false, tt.wantRequests}, {true, tt.wantStrm}} {
				for _, user := range []int64{1, 2} {
					got := 0
					for got < 1000 {
						if _, ok := l.acquire(user, c.stream); !ok {
							break
						}
						got++
					}
					if want := c.want; (want < 0 && got != 1000) || (want >= 0 && got != want) {
						t.Errorf("user %d, stream %v: %d admitted, want %d (-1: all 1,000)", user, c.stream, got, want)
					}
				}
			}
		})
	}
}
