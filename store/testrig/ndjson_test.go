package testrig_test

import (
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/store/testrig"
)

// recorder is a testing.TB that notes failures instead of failing: a
// Fatal ends the goroutine, as it does a test's.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	failed []string
}

func (r *recorder) note(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, s)
}

func (r *recorder) Error(args ...any)                 { r.note(strings.TrimSpace(fmt.Sprintln(args...))) }
func (r *recorder) Errorf(format string, args ...any) { r.note(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }

// failures runs f with a recorder on a goroutine of its own and returns
// the failures it noted.
func failures(t *testing.T, f func(tb testing.TB)) []string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func TestReadAllDecodesEveryLine(t *testing.T) {
	lines := testrig.ReadAll(t, strings.NewReader("{\"type\":\"progress\",\"steps\":2}\r\n{\"type\":\"settled\"}"))
	values, raw := testrig.Split(lines)
	if want := []string{`{"type":"progress","steps":2}`, `{"type":"settled"}`}; !slices.Equal(raw, want) {
		t.Fatalf("raw = %q, want %q (the last line has no newline)", raw, want)
	}
	if got := lines[0].Type(); got != "progress" {
		t.Errorf("Type = %q, want progress", got)
	}
	if got := lines[0].Int("steps"); got != 2 {
		t.Errorf("Int(steps) = %d, want 2", got)
	}
	if values[1]["type"] != "settled" || lines[1].Int("steps") != 0 {
		t.Errorf("second line = %v, want settled without steps", values[1])
	}
}

func TestReadAllFailsOnALineThatIsNoJSONObject(t *testing.T) {
	got := failures(t, func(tb testing.TB) { testrig.ReadAll(tb, strings.NewReader("{\"a\":1}\n[1]\n")) })
	if len(got) != 1 || !strings.Contains(got[0], `"[1]"`) {
		t.Errorf("failures = %q, want one naming the line [1]", got)
	}
}

// TestStreamHandsOverLinesAsTheyArrive: a line is there before the next
// is written; WaitFor finds a line among those read; Rest is what Next
// has not returned; the end of the body is a nil error.
func TestStreamHandsOverLinesAsTheyArrive(t *testing.T) {
	pr, pw := io.Pipe()
	start := time.Now()
	s := testrig.Read(t, pr, start)
	write := func(line string) {
		t.Helper()
		if _, err := io.WriteString(pw, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"type":"progress","steps":0}`)
	if l := s.Next(t, 5*time.Second); l.Raw != `{"type":"progress","steps":0}` || l.At < 0 || l.Arrived.Before(start) {
		t.Fatalf("first line = %s at %s (%s), want progress 0 after the start", l, l.At, l.Arrived)
	}
	if s.Ended() {
		t.Fatal("the stream ended while its body is open")
	}
	write(`{"type":"keepalive","steps":0}`)
	write(`{"type":"progress","steps":1}`)
	if l := s.WaitFor(t, 5*time.Second, "step 1", func(l testrig.Line) bool { return l.Int("steps") == 1 }); l.Type() != "progress" {
		t.Errorf("WaitFor = %s, want progress 1", l)
	}
	write(`{"type":"settled"}`)
	pw.Close()
	rest := s.Rest(t, 5*time.Second)
	if got := len(rest); got != 3 || rest[0].Type() != "keepalive" || rest[2].Type() != "settled" {
		t.Errorf("rest = %v, want the three lines after the first", rest)
	}
	lines, err := s.Wait(t, 5*time.Second)
	if err != nil || len(lines) != 4 {
		t.Errorf("Wait = %d lines, %v; want 4 and a clean end", len(lines), err)
	}
	if !s.Ended() || s.EndedAt() < lines[3].At {
		t.Errorf("Ended %t at %s, want ended after the last line (%s)", s.Ended(), s.EndedAt(), lines[3].At)
	}
	if !strings.Contains(s.String(), "s {\"type\":\"settled\"}") {
		t.Errorf("String = %s, want every line with its time", s)
	}
}

// TestStreamReportsHowTheBodyEnded: a read error is the stream's end, and
// the part of a line it cut is no line; a line that is no JSON object is
// the error Wait returns, and an error of the test where Each hands it
// over.
func TestStreamReportsHowTheBodyEnded(t *testing.T) {
	cut := errors.New("connection reset")
	pr, pw := io.Pipe()
	s := testrig.Read(t, pr, time.Now())
	io.WriteString(pw, "{\"type\":\"progress\"}\n{\"type\":\"pro")
	pw.CloseWithError(cut)
	lines, err := s.Wait(t, 5*time.Second)
	if !errors.Is(err, cut) || len(lines) != 1 {
		t.Errorf("Wait = %v, %v; want the whole line only and the read error", lines, err)
	}

	pr, pw = io.Pipe()
	s = testrig.Read(t, pr, time.Now())
	go func() {
		io.WriteString(pw, "{\"type\":\"progress\"}\nnot json\n")
		pw.Close()
	}()
	got := failures(t, func(tb testing.TB) {
		for range s.Each(tb, 5*time.Second) {
		}
	})
	if len(got) != 1 || !strings.Contains(got[0], `"not json" is not a JSON object`) {
		t.Errorf("Each's failures = %q, want one naming the line", got)
	}
	if _, err := s.Wait(t, time.Second); err == nil || !strings.Contains(err.Error(), "not json") {
		t.Errorf("Wait's error = %v, want the line that is no JSON", err)
	}
}

// TestStreamDeadlines: Line says, without failing the test, that no line
// came in time or that the body ended first; Next and WaitFor fail the
// test then; Close ends the stream.
func TestStreamDeadlines(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	s := testrig.Read(t, pr, time.Now())
	if _, err := s.Line(0, 20*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no line 1 within") {
		t.Errorf("Line(0) of a silent stream = %v, want no line in time", err)
	}
	if got := failures(t, func(tb testing.TB) { s.Next(tb, 20*time.Millisecond) }); len(got) != 1 {
		t.Errorf("Next of a silent stream failed %q, want once", got)
	}
	s.Close()
	if _, err := s.Wait(t, 5*time.Second); err == nil {
		t.Error("a closed body ended without an error")
	}
	if _, err := s.Line(0, time.Second); err == nil || !strings.Contains(err.Error(), "ended after 0 lines") {
		t.Errorf("Line(0) of an ended stream = %v, want the end", err)
	}
	got := failures(t, func(tb testing.TB) {
		s.WaitFor(tb, time.Second, "a settled line", func(testrig.Line) bool { return true })
	})
	if len(got) != 1 || !strings.Contains(got[0], "ended before a settled line") {
		t.Errorf("WaitFor on an ended stream failed %q, want once, saying so", got)
	}
}

// TestOnlyTestsImportTestrig: no package's own (non-test) files import
// this one.
func TestOnlyTestsImportTestrig(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/turnstile-dev/turnstile/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if slices.Contains(strings.Fields(imports), "github.com/turnstile-dev/turnstile/store/testrig") {
			t.Errorf("%s imports store/testrig outside its tests", pkg)
		}
	}
}
