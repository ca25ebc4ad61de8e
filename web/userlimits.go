package web

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/turnstile-dev/turnstile/runtime"
)

// What one user may hold open at once in this process: API requests, and
// streams apart from them. A stream is any response the client asked to
// get as NDJSON (Accept: application/x-ndjson) — a streamed start,
// decision, answer or bulk, a decision that lost its claim and follows
// the winner's continuation, from the API or from the inbox's and the
// playground's scripts — and every event stream (GET
// /api/runs/:id/events), whatever it accepts. The pages and their plain
// forms are not counted: they end as soon as they are rendered or
// decided, and a form weighs at most maxFormBytes. A refused stream of a
// page's script falls back to the plain form post, as on any answer that
// is not its stream.

// The defaults of Deps.MaxUserRequests and Deps.MaxUserStreams.
const (
	DefaultMaxUserRequests = 32
	DefaultMaxUserStreams  = 64
)

// openKey is what is counted: a user's requests, or their streams.
type openKey struct {
	user   int64
	stream bool
}

// userLimits counts what each user has open. An entry lives only while
// its count is above 0, so the map holds no more entries than there are
// requests open.
type userLimits struct {
	requests, streams int // the most of each; 0: no bound

	mu   sync.Mutex
	open map[openKey]int
}

// newUserLimits bounds requests and streams as Deps says: the default for
// 0, no bound for less.
func newUserLimits(requests, streams int) *userLimits {
	bound := func(n, def int) int {
		switch {
		case n == 0:
			return def
		case n < 0:
			return 0
		}
		return n
	}
	return &userLimits{requests: bound(requests, DefaultMaxUserRequests), streams: bound(streams, DefaultMaxUserStreams),
		open: map[openKey]int{}}
}

func (l *userLimits) limit(stream bool) int {
	if stream {
		return l.streams
	}
	return l.requests
}

// acquire counts a request or a stream of a user, unless they have the
// most open already; release (once, however often it is called) ends it.
func (l *userLimits) acquire(user int64, stream bool) (release func(), ok bool) {
	k := openKey{user: user, stream: stream}
	limit := l.limit(stream)
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit > 0 && l.open[k] >= limit {
		return func() {}, false
	}
	l.open[k]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[k]--; l.open[k] <= 0 {
				delete(l.open, k)
			}
		})
	}, true
}

// openPerUser is how many users have anything counted.
func (s *Server) openPerUser() int {
	s.userLimits.mu.Lock()
	defer s.userLimits.mu.Unlock()
	users := map[int64]bool{}
	for k := range s.userLimits.open {
		users[k.user] = true
	}
	return len(users)
}

// admitUser counts a request of an authenticated user until release: as a
// stream when the route always streams or the client asked for NDJSON.
// Its error is the refusal too_many_requests; nothing of the request was
// read.
func (s *Server) admitUser(r *http.Request, user int64, streams bool) (release func(), err error) {
	stream := streams || wantsStream(r)
	release, ok := s.userLimits.acquire(user, stream)
	if !ok {
		what := "requests"
		if stream {
			what = "streams"
		}
		return release, &runtime.Refusal{Code: runtime.CodeTooManyRequests, Message: fmt.Sprintf(
			"you have %d %s open at once, the most one user may; wait for one of them to end, then try again", s.userLimits.limit(stream), what)}
	}
	return release, nil
}
