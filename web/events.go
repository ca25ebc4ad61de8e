package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
)

// The event stream follows a run through the engine's feed (runtime.Watch):
// it sees the steps of any process on the same database — another request,
// a worker, another server instance — while the process asks the store
// once per interval for all its followed runs, and nothing at all for a
// run one of its own continuations carries out.

// followGiveUp is how long a follower's own reads may keep failing (a
// database restart) before its stream ends with an error line.
const followGiveUp = 30 * time.Second

func toEventLine(e runtime.Event) eventLine {
	payload := e.Payload
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	return eventLine{Type: "event", Seq: e.Seq, Turn: max(e.Turn, 1), Kind: e.Kind, Round: e.Round, DurationMS: e.DurationMS,
		CreatedAt: e.CreatedAt.UTC().Format(timeFormat), Payload: payload}
}

// live reports whether a run in this status may still record events without
// a person acting first.
func live(s runtime.Status) bool {
	return s == runtime.StatusRunning || s == runtime.StatusQueued || s == runtime.StatusDecided
}

// eventsQuery is what GET /api/runs/:id/events takes.
type eventsQuery struct {
	afterSeq int
	follow   bool
	// all: stay attached across pauses, decisions, settles and new turns
	// until the client leaves (follow=all).
	all bool
}

// parseEventsQuery reads after_seq (a non-negative integer, 0 when absent)
// and follow (true when absent, else "true" or "false"); anything else is an
// invalid_request refusal. follow=all follows the run across its pauses
// and turns.
func parseEventsQuery(r *http.Request) (eventsQuery, error) {
	q := r.URL.Query()
	eq := eventsQuery{follow: true}
	if q.Has("after_seq") {
		// Seqs are stored as a signed 32-bit INT: a larger after_seq names
		// no event, and its first_seq (after_seq+1) must not overflow.
		n, err := strconv.ParseUint(q.Get("after_seq"), 10, 31)
		if err != nil {
			return eq, &runtime.Refusal{Code: runtime.CodeInvalidRequest,
				Message: "after_seq must be an integer from 0 to 2147483647, the seq of the last event you have"}
		}
		eq.afterSeq = int(n)
	}
	if q.Has("follow") {
		switch q.Get("follow") {
		case "true":
		case "false":
			eq.follow = false
		case "all":
			eq.all = true
		default:
			return eq, &runtime.Refusal{Code: runtime.CodeInvalidRequest,
				Message: `follow must be "true" (until the run pauses or settles), "false" (what is stored) or "all" (across pauses and turns)`}
		}
	}
	return eq, nil
}

// latestSeq is the highest stored seq of a run, given the events stored
// after afterSeq.
func (s *Server) latestSeq(ctx context.Context, runID int64, after []runtime.Event) (int, error) {
	if len(after) > 0 {
		return after[len(after)-1].Seq, nil
	}
	return s.events.LastSeq(ctx, runID)
}

// apiEvents streams a run's events to its owner and admins: the
// attached line, the stored events after after_seq, then, when following a
// live run, the events any process records as they are committed, and the
// end line once the run is settled or waiting. Refusals (unknown or hidden
// run, bad query) are JSON errors before the stream starts; after the first
// line there are only lines, the last one end (or error when the store stays
// unreadable), unless the client left.
func (s *Server) apiEvents(w http.ResponseWriter, r *http.Request, ps httprouter.Params, actor runtime.Actor) {
	ctx := r.Context()
	id, ok := s.runParam(w, r, s.at.api, ps)
	if !ok {
		return
	}
	q, err := parseEventsQuery(r)
	if err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	// The status is read before the events: a run that pauses or settles
	// commits its last event with its status, so the backlog holds every
	// event up to the status the lines report.
	run, _, err := s.engine.Visible(ctx, id, actor)
	if err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	backlog, err := s.events.Events(ctx, id, q.afterSeq)
	if err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	latest, err := s.latestSeq(ctx, id, backlog)
	if err != nil {
		s.refuse(w, r, s.at.api, id, err)
		return
	}
	first := q.afterSeq + 1
	if len(backlog) > 0 {
		first = backlog[0].Seq
	}

	st := s.startStream(w)
	// stop runs before the last line, so no keepalive follows it, and again
	// on every other way out.
	stop := st.keepalives(s.keepalive, func() any { return typeLine{Type: "keepalive"} })
	defer stop()
	st.send(lineAttached, attachedLine{Type: "attached", Turn: run.ConversationTurn, FirstSeq: first, LatestSeq: latest, Status: run.Status, Live: live(run.Status)})
	last := q.afterSeq
	for _, e := range backlog {
		st.send(lineEvent, toEventLine(e))
		last = e.Seq
	}
	if !q.follow {
		stop()
		st.send(lineEnd, endLine{Type: "end", Status: run.Status})
		return
	}
	if q.all {
		s.followAll(ctx, st, stop, id, actor, last, run.Status)
		return
	}
	s.follow(ctx, st, stop, id, actor, last, run.Status)
}

// unavailableLine ends an event stream whose store stayed unreadable, after
// the event last it sent.
func unavailableLine(last int) errorLine {
	return errorLine{Type: "error", Code: "unavailable", AfterSeq: last,
		Message: "the run's events cannot be read right now; reconnect with after_seq"}
}

// idleLook is how often a follow=all stream looks at a run that neither
// runs nor is about to (it waits for a decision, or has settled and may
// get a follow-up): two primary-key reads a look, for as long as the
// client stays. While the run is live it waits on the process's feed like
// any follower.
const idleLook = time.Second

// followAll follows a run across its pauses, decisions and turns until the
// client leaves: the events as the feed hands them over while the run is
// live, and a look every idleLook while it is not. It ends with error when
// the store stays unreadable, and with end when the run is gone (erased).
func (s *Server) followAll(ctx context.Context, st *stream, stop func(), id int64, actor runtime.Actor, last int, status runtime.Status) {
	tick := time.NewTicker(idleLook)
	defer tick.Stop()
	for {
		if live(status) {
			w := s.events.Watch(id, last)
			u, err := s.watchUntilIdle(ctx, st, w, &last)
			w.Close()
			switch {
			case ctx.Err() != nil:
				return
			case err != nil:
				stop()
				st.send(lineError, unavailableLine(last))
				return
			}
			status = u
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_, err := s.poll(ctx, st, id, actor, &last, &status)
		switch {
		case ctx.Err() != nil:
			return
		case runtime.CodeOf(err) == runtime.CodeNotFound:
			stop()
			st.send(lineEnd, endLine{Type: "end", Status: "erased"})
			return
		case err != nil:
			s.log.Warn("event stream read failed", "run", id, "err", err)
		}
	}
}

// watchUntilIdle sends what a watch hands over until the run is no longer
// live, and returns the status it stopped at.
func (s *Server) watchUntilIdle(ctx context.Context, st *stream, w *runtime.Watch, last *int) (runtime.Status, error) {
	for {
		u, err := w.Next(ctx)
		if err != nil {
			return "", err
		}
		sendUpdate(st, u, last)
		if u.Ended != "" {
			return u.Ended, nil
		}
	}
}

// follow sends the events recorded after seq last as they appear, then the
// end line once the run is settled or waiting. When the run was not live
// at attach time it looks once more right away, in case a decision moved
// it on meanwhile; otherwise it waits on the feed.
func (s *Server) follow(ctx context.Context, st *stream, stop func(), id int64, actor runtime.Actor, last int, status runtime.Status) {
	if !live(status) {
		ended, err := s.poll(ctx, st, id, actor, &last, &status)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && ended:
			stop()
			st.send(lineEnd, endLine{Type: "end", Status: status})
			return
		case err != nil:
			s.log.Warn("event stream read failed", "run", id, "err", err)
		}
	}
	w := s.events.Watch(id, last)
	defer w.Close()
	for {
		u, err := w.Next(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			stop()
			st.send(lineError, unavailableLine(last))
			return
		case u.Ended != "":
			stop()
			st.send(lineEnd, endLine{Type: "end", Status: u.Ended})
			return
		}
		sendUpdate(st, u, &last)
	}
}

// sendUpdate sends what a watch handed over: events, or pieces of a
// round's text (live only: a run this process holds), each naming its
// turn as the event lines do. Every reader of the event stream may read
// the run.
func sendUpdate(st *stream, u runtime.Update, last *int) {
	for _, e := range u.Events {
		st.send(lineEvent, toEventLine(e))
		*last = e.Seq
	}
	for _, d := range u.Deltas {
		typ, l := toTextLine(d)
		l.Turn = max(d.Turn, 1)
		st.send(typ, l)
	}
}

// poll sends the events recorded after *last and reads the run's status
// again; once the run is no longer live it sends the events committed up
// to that status too and reports that the stream ended.
func (s *Server) poll(ctx context.Context, st *stream, id int64, actor runtime.Actor, last *int, status *runtime.Status) (ended bool, err error) {
	drain := func() error {
		evs, err := s.events.Events(ctx, id, *last)
		if err != nil {
			return err
		}
		for _, e := range evs {
			st.send(lineEvent, toEventLine(e))
			*last = e.Seq
		}
		return nil
	}
	if err := drain(); err != nil {
		return false, err
	}
	run, _, err := s.engine.Visible(ctx, id, actor)
	if err != nil {
		return false, err
	}
	*status = run.Status
	if live(run.Status) {
		return false, nil
	}
	if err := drain(); err != nil {
		return false, err
	}
	return true, nil
}
