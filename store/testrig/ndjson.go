package testrig

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"
)

// Line is one line of an NDJSON body: its text, what it decodes to, and
// when the client read it.
type Line struct {
	Raw   string
	Value map[string]any // nil when Raw is no JSON object
	Err   error          // why Raw is no JSON object
	// Arrived is when the client read the line; At is that since the
	// stream's start (see Read).
	Arrived time.Time
	At      time.Duration
}

// String is the line's text.
func (l Line) String() string { return l.Raw }

// Type is the line's "type", "" when it has none.
func (l Line) Type() string {
	s, _ := l.Value["type"].(string)
	return s
}

// Int is a number of the line as an int, 0 when it is not a number.
func (l Line) Int(key string) int {
	f, _ := l.Value[key].(float64)
	return int(f)
}

func decodeLine(raw []byte, start time.Time) Line {
	now := time.Now()
	l := Line{Raw: string(raw), Arrived: now, At: now.Sub(start)}
	if err := json.Unmarshal(raw, &l.Value); err != nil {
		l.Value, l.Err = nil, fmt.Errorf("line %q is not a JSON object: %w", l.Raw, err)
	}
	return l
}

// readLines hands each line of r to line as it arrives and returns how
// the body ended: nil at its end, else the read error. Like a
// bufio.Scanner it hands over a last line without a newline at the end of
// the body, but not the part of a line a read error cut.
func readLines(r io.Reader, start time.Time, line func(Line)) error {
	br := bufio.NewReader(r)
	for {
		b, err := br.ReadBytes('\n')
		if err == nil || (errors.Is(err, io.EOF) && len(b) > 0) {
			line(decodeLine(bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r")), start))
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// ReadAll reads a whole NDJSON body at once. A line that is no JSON
// object, or a read error, fails the test.
func ReadAll(t testing.TB, r io.Reader) []Line {
	t.Helper()
	var lines []Line
	err := readLines(r, time.Now(), func(l Line) { lines = append(lines, l) })
	for _, l := range lines {
		if l.Err != nil {
			t.Fatal(l.Err)
		}
	}
	if err != nil {
		t.Fatalf("reading the NDJSON body after %d lines: %v", len(lines), err)
	}
	return lines
}

// Split returns the lines' values and texts, in order.
func Split(lines []Line) (values []map[string]any, raw []string) {
	for _, l := range lines {
		values, raw = append(values, l.Value), append(raw, l.Raw)
	}
	return values, raw
}

// Stream is an NDJSON body read in the background as its lines arrive,
// so that a test sees when each came, and how the body ended.
type Stream struct {
	start time.Time
	body  io.Closer
	done  chan struct{} // closed when the body ended

	mu      sync.Mutex
	lines   []Line
	changed chan struct{} // closed, and replaced, at each line and at the end
	err     error         // how the body ended: nil at its end
	end     time.Duration // when it ended, since start
	next    int           // the cursor of Next and Each
}

// Read reads body in the background; start is what each line's At counts
// from, usually when the request was sent. The body is closed, and the
// reading waited for, when the test ends.
func Read(t testing.TB, body io.ReadCloser, start time.Time) *Stream {
	t.Helper()
	s := &Stream{start: start, body: body, done: make(chan struct{}), changed: make(chan struct{})}
	go func() {
		err := readLines(body, start, func(l Line) {
			s.mu.Lock()
			s.lines = append(s.lines, l)
			s.notifyLocked()
			s.mu.Unlock()
		})
		s.mu.Lock()
		s.err, s.end = err, time.Since(start)
		close(s.done)
		s.notifyLocked()
		s.mu.Unlock()
	}()
	t.Cleanup(func() {
		body.Close()
		<-s.done
	})
	return s
}

func (s *Stream) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Close closes the body, as a client that goes away does. The stream
// then ends, with the error that closing the body gives its reader.
func (s *Stream) Close() { s.body.Close() }

// Lines are the lines read so far.
func (s *Stream) Lines() []Line {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Line(nil), s.lines...)
}

// Elapsed is the time since the stream's start.
func (s *Stream) Elapsed() time.Duration { return time.Since(s.start) }

// Ended reports whether the body ended.
func (s *Stream) Ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// EndedAt is when the body ended, since the stream's start; 0 while it
// has not.
func (s *Stream) EndedAt() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end
}

// await waits until cond, which runs under the lock at each line and at
// the end of the body, says yes, or until the deadline; it reports whether
// cond said yes.
func (s *Stream) await(deadline time.Time, cond func() bool) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		s.mu.Lock()
		ok, changed := cond(), s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-timer.C:
			s.mu.Lock()
			defer s.mu.Unlock()
			return cond()
		}
	}
}

// Line returns line i (from 0), waiting up to within for it; an error
// when the body ended before it or the time ran out. It does not fail
// the test, so any goroutine may call it.
func (s *Stream) Line(i int, within time.Duration) (Line, error) {
	s.await(time.Now().Add(within), func() bool { return len(s.lines) > i || s.Ended() })
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(s.lines) > i:
		return s.lines[i], nil
	case s.Ended():
		return Line{}, fmt.Errorf("the stream ended after %d lines (%v), before line %d", len(s.lines), s.err, i+1)
	default:
		return Line{}, fmt.Errorf("no line %d within %s; %d lines so far", i+1, within, len(s.lines))
	}
}

// Next returns the line after the last one Next or Each returned, waiting
// up to within for it; the body ending first, or the deadline, fails the
// test, and a line that is no JSON object is an error of the test.
func (s *Stream) Next(t testing.TB, within time.Duration) Line {
	t.Helper()
	s.mu.Lock()
	i := s.next
	s.mu.Unlock()
	l, err := s.Line(i, within)
	if err != nil {
		t.Fatalf("%v:%s", err, s)
	}
	s.mu.Lock()
	s.next = i + 1
	s.mu.Unlock()
	if l.Err != nil {
		t.Error(l.Err)
	}
	return l
}

// Each yields the lines after the last one Next or Each returned, each as
// it arrives, until the body ends; when it has not ended within the time
// given, the test fails. A line that is no JSON object is an error of the
// test.
func (s *Stream) Each(t testing.TB, within time.Duration) iter.Seq[Line] {
	return func(yield func(Line) bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			var l Line
			has := false
			s.await(deadline, func() bool {
				if s.next < len(s.lines) {
					l, has = s.lines[s.next], true
					s.next++
				}
				return has || s.Ended()
			})
			switch {
			case has:
				if l.Err != nil {
					t.Error(l.Err)
				}
				if !yield(l) {
					return
				}
			case s.Ended():
				return
			default:
				t.Fatalf("the stream did not end within %s:%s", within, s)
			}
		}
	}
}

// Rest is the lines Each yields, once the body ended.
func (s *Stream) Rest(t testing.TB, within time.Duration) []Line {
	t.Helper()
	var rest []Line
	for l := range s.Each(t, within) {
		rest = append(rest, l)
	}
	return rest
}

// WaitFor returns the first line, of all read, that ok says yes to,
// waiting up to within for one; the body ending first, or the deadline,
// fails the test, saying what was awaited. ok runs with the stream locked:
// it must not call the stream.
func (s *Stream) WaitFor(t testing.TB, within time.Duration, what string, ok func(Line) bool) Line {
	t.Helper()
	var found Line
	has, seen := false, 0
	s.await(time.Now().Add(within), func() bool {
		for ; seen < len(s.lines) && !has; seen++ {
			found, has = s.lines[seen], ok(s.lines[seen])
		}
		return has || s.Ended()
	})
	switch {
	case has:
		return found
	case s.Ended():
		t.Fatalf("the stream ended before %s:%s", what, s)
	default:
		t.Fatalf("no %s within %s:%s", what, within, s)
	}
	return Line{}
}

// Wait waits up to within for the body to end, failing the test when it
// does not, and returns every line and an error: the first line that is
// no JSON object, else how the body ended (nil at its end).
func (s *Stream) Wait(t testing.TB, within time.Duration) ([]Line, error) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(within):
		t.Fatalf("the stream did not end within %s:%s", within, s)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lines {
		if l.Err != nil {
			return append([]Line(nil), s.lines...), l.Err
		}
	}
	return append([]Line(nil), s.lines...), s.err
}

// String lists the lines read so far with when each came, for failure
// messages.
func (s *Stream) String() string {
	var b strings.Builder
	for _, l := range s.Lines() {
		fmt.Fprintf(&b, "\n  %6.2fs %s", l.At.Seconds(), l.Raw)
	}
	return b.String()
}
