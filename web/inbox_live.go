package web

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// The pages follow the person's feed (GET /api/feed, through
// static/feed.js): each page takes a cursor before it reads what it
// shows, so that its script misses no change committed after the read.
// The inbox asks this file's route for each changed run's card.

// headerInboxTotal carries, on every answer of the card route, how many
// runs wait for the user's decision: the inbox's count follows it, right
// however often (or in whatever order) the feed tells of a change.
const headerInboxTotal = "X-Inbox-Total"

// feedCursor is where a page's script attaches the feed from; "" (no live
// updates, the page works as before) when the store cannot say.
func (s *Server) feedCursor(ctx context.Context) string {
	c, err := s.events.FeedCursor(ctx)
	if err != nil {
		s.log.Warn("feed: no cursor for a page; it will not follow changes", "err", err)
		return ""
	}
	return c.String()
}

// inboxCard is GET /inbox/cards/:id: the card of a run that waits for the
// user's decision, as the inbox shows it, for inbox.js to add to the page
// when the feed tells that it waits; 204 when it does not (or not for
// this user: decided, settled, unknown). Both carry the inbox's total.
func (s *Server) inboxCard(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.page, ps)
	if !ok {
		return
	}
	actor := currentUser(r).Actor()
	p, err := s.engine.PendingOne(r.Context(), id, actor)
	code := runtime.CodeOf(err)
	if err != nil && code != runtime.CodeNotFound && code != runtime.CodeNotWaiting {
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	total, err := s.engine.Pending(r.Context(), actor, runtime.WaitingQuery{Limit: 1})
	if err != nil {
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	w.Header().Set(headerInboxTotal, strconv.Itoa(total.Total))
	w.Header().Set("Cache-Control", "no-store")
	if code != "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	s.render(w, r, http.StatusOK, templates.InboxCard(s.csrfToken(r.Context()), time.Now(), s.inboxRun(actor, p, nil)))
}
