package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// lineRun is a line of the feed: a run changed.
const lineRun = "run"

// codeShuttingDown is the code of the feed's error line when the server
// drains for a shutdown: the client attaches again from its cursor.
const codeShuttingDown runtime.Code = "shutting_down"

// feedAttached is the feed's first line: the cursor it starts from.
type feedAttached struct {
	Type   string `json:"type"`
	Cursor string `json:"cursor"`
}

// feedKeepalive is the feed's keepalive: it carries the client's cursor,
// so that a quiet feed's client never holds one that ages out.
type feedKeepalive struct {
	Type   string `json:"type"`
	Cursor string `json:"cursor"`
}

// runChangeLine is one change of a run the caller may read or decide; the
// title only to who may read it.
type runChangeLine struct {
	Type          string `json:"type"`
	Cursor        string `json:"cursor"`
	RunID         int64  `json:"run_id"`
	Change        string `json:"change"`
	Status        string `json:"status"`
	Configuration string `json:"configuration"`
	Title         string `json:"title,omitempty"`
	Turn          int    `json:"turn"`
	// Decision is the kind of a decided turn (approve, deny, mixed,
	// input), and DecidedBy who decided it; of a vote, approve and the
	// voter; both empty for other changes, DecidedBy for a decision by
	// nobody (an expiry) too.
	Decision  string `json:"decision,omitempty"`
	DecidedBy string `json:"decided_by,omitempty"`
}

// feedLineCache holds each change's line encoded once per shape (with the
// title, without), for every feed client of the process: with a thousand
// clients a change is encoded twice, not a thousand times.
type feedLineCache struct {
	mu    sync.Mutex
	lines map[feedLineKey][]byte
}

// feedLineKey is one change as one shape of line: its cursor is the
// line's too.
type feedLineKey struct {
	id, pos, at int64
	titled      bool
}

// feedLinesKept bounds the cache; past it, it starts again empty.
const feedLinesKept = 1 << 16

// encode returns the line of l as fr may see it, with its newline, or
// nil when fr may not see it. The bytes are shared: never append to them.
func (c *feedLineCache) encode(fr feedReader, l runtime.FeedLine) []byte {
	line, ok := fr.line(l)
	if !ok {
		return nil
	}
	k := feedLineKey{id: l.Change.ID, pos: l.Cursor.Pos, at: l.Cursor.At.Unix(), titled: line.Title != ""}
	c.mu.Lock()
	b, ok := c.lines[k]
	c.mu.Unlock()
	if ok {
		return b
	}
	b, err := json.Marshal(line)
	if err != nil {
		return nil // lines are built from plain values; this cannot happen
	}
	b = append(b, '\n')
	c.mu.Lock()
	if c.lines == nil || len(c.lines) >= feedLinesKept {
		c.lines = make(map[feedLineKey][]byte)
	}
	c.lines[k] = b
	c.mu.Unlock()
	return b
}

// feedReader is what a feed client may see: runs it may read (with their
// titles), runs it may decide (without), as its token's scopes allow.
type feedReader struct {
	actor        runtime.Actor
	read, decide bool
}

// line is a change as the reader may see it, or false when it may not.
func (fr feedReader) line(l runtime.FeedLine) (runChangeLine, bool) {
	c := l.Change
	reads := fr.read && fr.actor.MayRead(c.OwnerID)
	if c.OwnerID == 0 || !(reads || (fr.decide && fr.actor.MayDecide(c.OwnerID))) {
		return runChangeLine{}, false
	}
	out := runChangeLine{Type: lineRun, Cursor: l.Cursor.String(), RunID: c.RunID, Change: string(c.Change),
		Status: string(c.Status), Configuration: c.Configuration, Turn: c.Turn, Decision: c.Decision, DecidedBy: c.DecidedBy}
	if reads && !c.Erased {
		out.Title = c.Title
	}
	return out, true
}

// apiFeed is GET /api/feed?after=<cursor>: the attached line, then a line
// for every change of a run the caller may read or decide, in the order
// the process's change poller reads them, with keepalives between, until
// the client leaves. after resumes from a cursor of an earlier line
// without missing a change (one may come twice); a cursor older than the
// change log keeps is refused 410 cursor_expired, a malformed one 400. The
// stream ends with an error line when the store stays unreadable.
func (s *Server) apiFeed(w http.ResponseWriter, r *http.Request, _ httprouter.Params, actor runtime.Actor) {
	ctx := r.Context()
	var after *runtime.FeedCursor
	if q := r.URL.Query(); q.Has("after") {
		c, err := runtime.ParseFeedCursor(q.Get("after"), time.Now())
		if err != nil {
			s.refuse(w, r, s.at.api, 0, err)
			return
		}
		after = &c
	}
	fr := feedReader{actor: actor, read: tokenHas(r, runtime.ScopeRunRead), decide: tokenHas(r, runtime.ScopeRunDecide)}
	fw, err := s.events.WatchChanges(ctx, after)
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	defer fw.Close()
	st := s.startStream(w)
	stop := st.keepalives(s.keepalive, func() any { return feedKeepalive{Type: lineKeepalive, Cursor: fw.Cursor().String()} })
	defer stop()
	st.send(lineAttached, feedAttached{Type: lineAttached, Cursor: fw.Attached().String()})
	for {
		lines, err := fw.Next(ctx)
		if err != nil {
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, runtime.ErrFeedDraining):
				stop()
				st.send(lineError, errorLine{Type: lineError, Code: string(codeShuttingDown),
					Message: "this server is shutting down; attach again with the last cursor you had"})
			default:
				stop()
				s.log.Warn("feed: the change log cannot be read", "err", err)
				st.send(lineError, errorLine{Type: lineError, Code: string(codeInternal),
					Message: "the change log cannot be read for now; attach again with the last cursor you had"})
			}
			return
		}
		out := make([][]byte, 0, len(lines))
		for _, l := range lines {
			if b := s.feedLines.encode(fr, l); b != nil {
				out = append(out, b)
			}
		}
		st.sendLines(lineRun, out)
	}
}
