package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// run shows a run's timeline to its owner and admins; to anyone else it
// does not exist. Each event shows by its kind, read from its payload's
// struct (see timeline), and a failed run's cause from its settle event.
func (s *Server) run(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.page, ps)
	if !ok {
		return
	}
	u := currentUser(r)
	cursor := s.feedCursor(r.Context()) // before the read: nothing after it is missed
	d, err := s.engine.Detail(r.Context(), id, u.Actor())
	if err != nil {
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	run := d.Run
	sum := templates.RunSummary{ID: run.ID, Configuration: d.Configuration.Name, Origin: string(run.Origin),
		Status: string(run.Status), Reason: run.TerminationReason, Title: run.Title, Prompt: run.Prompt, Answer: run.Answer,
		Iterations: run.Iterations, CreatedAt: run.CreatedAt, UpdatedAt: run.UpdatedAt,
		Waiting: run.Status.Waiting(), CanCancel: !run.Status.Terminal(), CanErase: run.Status.Terminal(),
		Votes: votesLine(run.ApprovalsRequired, run.Votes),
		Turn:  run.ConversationTurn, CanFollowUp: run.Status.Terminal()}
	if owner, err := s.users.User(r.Context(), run.OwnerID); err == nil {
		sum.Owner = owner.Name
	}
	page := templates.RunPage{Page: s.pageFor(r, fmt.Sprintf("Run %d", run.ID)), Run: sum}
	page.FeedCursor = cursor
	if page.FailedDeliveries, err = s.failedDeliveries(r, run.ID); err != nil {
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	if page.Conversation, err = s.conversation(r, run, d.Configuration, sum.Owner); err != nil {
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	page.Events = timeline(d.Events)
	s.render(w, r, http.StatusOK, templates.RunDetail(page))
}

// stepDuration is how long a step ran, for people: "812 ms", "12.4 s". Only
// model rounds and tool calls are timed; the other steps take no time of
// their own, and show none.
func stepDuration(e runtime.Event) string {
	switch {
	case e.Kind != runtime.KindLLM && e.Kind != runtime.KindTool && e.DurationMS == 0:
		return ""
	case e.DurationMS < 1000:
		return fmt.Sprintf("%d ms", e.DurationMS)
	case e.DurationMS < 60_000:
		return fmt.Sprintf("%.1f s", float64(e.DurationMS)/1000)
	}
	return fmt.Sprintf("%d min %d s", e.DurationMS/60_000, e.DurationMS%60_000/1000)
}

// cancelWait bounds how long the run page's cancel waits for a running
// run to settle before it answers: its holder stops the call in flight
// within about a second, and the page then shows the run cancelled.
const cancelWait = 2 * time.Second

// cancel cancels a run: at once when nobody holds it; a running run's
// holder stops its call in flight, and the answer waits for the settle
// (at most cancelWait). A native form post gets a flash and a 303 to the
// run; a script's fetch (Accept: application/json) gets {"run_id",
// "status"}, refusals as JSON errors.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	sf := surface(s.at.page)
	script := !prefersHTML(r) && acceptQuality(r, "application/json") > 0
	if script {
		sf = s.at.api
	}
	id, ok := s.runParam(w, r, sf, ps)
	if !ok {
		return
	}
	// Attached before the cancel, so that a settle right after it is not
	// missed; a watch costs no query while this process holds the run.
	last, err := s.events.LastSeq(r.Context(), id)
	if err != nil {
		s.refuse(w, r, sf, id, err)
		return
	}
	watch := s.events.Watch(id, last)
	defer watch.Close()
	res, err := s.engine.Cancel(r.Context(), id, currentUser(r).Actor())
	if err != nil {
		s.refuse(w, r, sf, id, err)
		return
	}
	status := res.Status
	if status == runtime.StatusRunning {
		status = awaitSettle(r.Context(), watch, cancelWait)
	}
	if script {
		s.writeJSON(w, http.StatusOK, map[string]any{"run_id": id, "status": status})
		return
	}
	if status == runtime.StatusCancelled {
		s.flash(r.Context(), fmt.Sprintf("Run %d was cancelled.", id))
	} else {
		s.flash(r.Context(), fmt.Sprintf("Run %d is being cancelled: it stops as soon as its holder sees the request.", id))
	}
	http.Redirect(w, r, fmt.Sprintf("/runs/%d", id), http.StatusSeeOther)
}

// awaitSettle waits, at most within, for the watched run to settle, and
// returns its status then: running when it did not settle in time (its
// holder died, say: a worker finishes the cancel when the lease lapses).
func awaitSettle(ctx context.Context, watch *runtime.Watch, within time.Duration) runtime.Status {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for {
		u, err := watch.Next(ctx)
		if err != nil {
			return runtime.StatusRunning
		}
		if u.Ended != "" {
			// Settled (cancelled, or completed by a last step that was
			// committed before the cancel), or paused: a pause cannot
			// follow a cancel request, whose flag the pause's commit reads.
			return u.Ended
		}
	}
}
