package web

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"time"
)

// requestIDHeader carries a request's id in and out: a proxy that sets it
// (nginx's $request_id) gets its own id back and in our log.
const requestIDHeader = "X-Request-Id"

// saneRequestID is what an incoming id must look like to be kept: short,
// and nothing that could forge a log line or a header.
var saneRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// AccessLog logs one line per request when its handler returns, streams
// included (a stream's line comes at its end): the method, the path
// without its query string (which may carry a token), the status, the
// bytes of the body, the duration, the request's id and the peer's
// address. No header and no query string is logged. The id is the
// incoming X-Request-Id when it is a short token of letters, digits, '.',
// '_' and '-', else 16 random hex digits; it is sent back in X-Request-Id.
// The writer it hands on writes and flushes straight through, and
// http.ResponseController reaches the server's writer through its Unwrap.
func AccessLog(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(requestIDHeader)
		if !saneRequestID.MatchString(id) {
			id = newRequestID()
		}
		w.Header().Set(requestIDHeader, id)
		rec := &recorder{ResponseWriter: w}
		returned := false
		// Deferred, so that a handler that panics (http.ErrAbortHandler
		// cuts a stream that way) is logged too.
		defer func() {
			status := rec.status
			if status == 0 && returned {
				status = http.StatusOK // what net/http sends for a handler that wrote nothing
			}
			attrs := []slog.Attr{
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", status),
				slog.Int64("bytes", rec.bytes),
				slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
				slog.String("request_id", id),
				slog.String("remote_addr", r.RemoteAddr),
			}
			if !returned {
				attrs = append(attrs, slog.Bool("aborted", true))
			}
			log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
		}()
		next.ServeHTTP(rec, r)
		returned = true
	})
}

// newRequestID returns 16 random hex digits.
func newRequestID() string {
	b := make([]byte, 8)
	rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return hex.EncodeToString(b)
}

// recorder notes the status and counts the body bytes; it buffers
// nothing.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (rec *recorder) WriteHeader(code int) {
	// 1xx answers (103 Early Hints) come before the real one.
	if rec.status == 0 && code >= 200 {
		rec.status = code
	}
	rec.ResponseWriter.WriteHeader(code)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// Unwrap gives http.ResponseController the server's writer: Flush,
// SetWriteDeadline and Hijack work through the recorder.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }
