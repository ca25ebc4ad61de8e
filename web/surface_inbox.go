package web

import (
	"context"
	"fmt"
	"net/http"

	"github.com/turnstile-dev/turnstile/runtime"
)

// inboxSurface answers decisions made in the inbox: refusals as a 303 to
// the inbox with a flash (the run's page with 422 for invalid input, the
// 404 page for a run the user may not see); with JavaScript (Accept:
// application/x-ndjson) the continuation streams counts only — an approve
// grant shows no content — and without, the durable path answers at once
// while a worker lives, landing on the run's page, which shows the outcome
// once there is one; else the continuation runs to its end and the
// outcome is the flash.
type inboxSurface struct{ s *Server }

func (inboxSurface) name() string            { return "inbox" }
func (inboxSurface) html(*http.Request) bool { return true }
func (inboxSurface) back(int64) string       { return "/inbox" }
func (inboxSurface) ownWords() bool          { return false }
func (inboxSurface) want(r *http.Request) want {
	if wantsStream(r) {
		return wantStream
	}
	return wantAnswer
}

// invalid shows the run's own inbox page (/inbox/runs/:id) with the
// refused form filled in again and the pipeline's messages.
func (sf inboxSurface) invalid(w http.ResponseWriter, r *http.Request, id int64, ref *runtime.Refusal) {
	sf.s.renderInboxRun(w, r, http.StatusUnprocessableEntity, id, &formState{values: r.PostForm,
		fields: ref.Fields, msg: "Some fields need another look."})
}

func (sf inboxSurface) recorded(w http.ResponseWriter, r *http.Request, id int64) {
	sf.s.flash(r.Context(), fmt.Sprintf("Decision recorded; run %d continues in the background.", id))
	http.Redirect(w, r, fmt.Sprintf("/inbox/runs/%d", id), http.StatusSeeOther)
}

func (sf inboxSurface) run(w http.ResponseWriter, r *http.Request, c *runtime.Continuation) {
	s := sf.s
	kind, tools := c.Decided()
	if !wantsStream(r) {
		s.flash(r.Context(), outcomeFlash(kind, tools, runToEnd(w, r, c, nil)))
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	s.streamProgress(w, r, c, actorOf(r).MayRead(c.OwnerID()), func(out runtime.Outcome) {
		// The headers (and the session cookie) left long ago: store the
		// flash now, before "settled" sends the page to /inbox to show
		// it; on a context of its own, since the client may have gone.
		ctx := context.WithoutCancel(r.Context())
		s.flash(ctx, outcomeFlash(kind, tools, out))
		if _, _, err := s.sessions.Commit(ctx); err != nil {
			s.log.Warn("save flash", "run", out.RunID, "err", err)
		}
	})
}

// follow streams a lost claim's progress in the inbox: the counts of the
// winner's continuation and settled, after the flash that says who
// decided and how the run ended.
func (sf inboxSurface) follow(w http.ResponseWriter, r *http.Request, f *follower) bool {
	s := sf.s
	if !wantsStream(r) {
		return false
	}
	s.streamProgress(w, r, f, false, func(out runtime.Outcome) {
		ctx := context.WithoutCancel(r.Context())
		s.flash(ctx, followedFlash(f.sum, out))
		if _, _, err := s.sessions.Commit(ctx); err != nil {
			s.log.Warn("save flash", "run", f.id, "err", err)
		}
	})
	return true
}
