package web

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// wantsStream reports whether a request asks for an NDJSON answer.
func wantsStream(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
}

// stream writes NDJSON lines: one writer serialises every line, flushes it
// at once and extends the write deadline for it, and remembers when the
// last line left so keepalives go out only after a silence. Once a write
// fails (the client is gone) it writes nothing more; the caller keeps
// going.
type stream struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	writeTimeout time.Duration
	lines        map[string]func() // counts the lines of each type

	mu     sync.Mutex
	last   time.Time
	broken bool
	// turn, once set, is written into every line that names none: every
	// line of a continuation's stream belongs to its turn.
	turn int
}

// setTurn names the conversation's turn the lines that follow belong to.
func (st *stream) setTurn(turn int) {
	st.mu.Lock()
	st.turn = turn
	st.mu.Unlock()
}

// startStream sends the headers of a stream with status 200.
func (s *Server) startStream(w http.ResponseWriter) *stream {
	h := w.Header()
	h.Set("Content-Type", "application/x-ndjson; charset=utf-8")
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	st := &stream{w: w, rc: http.NewResponseController(w), writeTimeout: s.writeTimeout, lines: s.lines}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.rc.SetWriteDeadline(time.Now().Add(st.writeTimeout))
	w.WriteHeader(http.StatusOK)
	st.flush()
	return st
}

// send writes one line; typ names it for turnstile_stream_lines_total
// (one of the line… constants).
func (st *stream) send(typ string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return // lines are built from plain values; this cannot happen
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.turn > 0 && len(b) > 2 && b[len(b)-1] == '}' {
		// Every line is an object whose kinds name no turn of their own
		// (those of the event stream do, which sets none here): its
		// "turn" goes last.
		b = append(append(b[:len(b)-1], `,"turn":`...), strconv.Itoa(st.turn)+"}"...)
	}
	b = append(b, '\n')
	st.last = time.Now()
	if st.broken {
		return
	}
	// A deadline error is not fatal: an HTTP/2 or test writer may not
	// support deadlines, and then none applies.
	st.rc.SetWriteDeadline(time.Now().Add(st.writeTimeout))
	if _, err := st.w.Write(b); err != nil {
		st.broken = true
		return
	}
	st.flush()
	if count := st.lines[typ]; count != nil && !st.broken {
		count()
	}
}

// sendLines writes lines already encoded, each ending in its newline, all
// of one type, and flushes once: a feed's batch of changes costs its
// client one write to the socket, not one a line. Lines sent this way
// carry no turn.
func (st *stream) sendLines(typ string, lines [][]byte) {
	if len(lines) == 0 {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.last = time.Now()
	if st.broken {
		return
	}
	st.rc.SetWriteDeadline(time.Now().Add(st.writeTimeout))
	for _, b := range lines {
		if _, err := st.w.Write(b); err != nil {
			st.broken = true
			return
		}
	}
	st.flush()
	if count := st.lines[typ]; count != nil && !st.broken {
		for range lines {
			count()
		}
	}
}

func (st *stream) flush() {
	if err := st.rc.Flush(); err != nil {
		st.broken = true
	}
}

// keepalives sends line() whenever every passed without a line, until
// stop is called (once or more), whatever the continuation is doing
// meanwhile. It holds
// no goroutine between keepalives — a timer's function runs only when
// one may be due — which matters with thousands of streams open.
func (st *stream) keepalives(every time.Duration, line func() any) (stop func()) {
	var (
		mu      sync.Mutex // held while a keepalive goes out, so stop waits for it
		stopped bool
		t       *time.Timer
	)
	fire := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		st.mu.Lock()
		due := st.last.Add(every)
		st.mu.Unlock()
		if wait := time.Until(due); wait > 0 {
			t.Reset(wait)
			return
		}
		st.send(lineKeepalive, line())
		t.Reset(every)
	}
	mu.Lock()
	t = time.AfterFunc(every, fire)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}
