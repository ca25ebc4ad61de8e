package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// historyPageSize is how many runs one page of GET /runs shows.
const historyPageSize = 50

// statuses a history filter may name.
var statuses = []runtime.Status{runtime.StatusQueued, runtime.StatusRunning, runtime.StatusWaitingForApproval,
	runtime.StatusWaitingForInput, runtime.StatusDecided, runtime.StatusCompleted, runtime.StatusFailed, runtime.StatusCancelled}

// runQuery reads the history's filters from a request: status,
// configuration (an identifier), owner (a user name; admins only),
// decided_by=me and before (the cursor of the page before). A filter that
// names nothing known is an invalid_request refusal.
func (s *Server) runQuery(r *http.Request, actor runtime.Actor) (runtime.RunQuery, error) {
	q := r.URL.Query()
	var rq runtime.RunQuery
	if v := q.Get("status"); v != "" {
		for _, st := range statuses {
			if string(st) == v {
				rq.Status = st
			}
		}
		if rq.Status == "" {
			return rq, invalid(fmt.Sprintf("status %q is not a run status", v))
		}
	}
	if v := q.Get("configuration"); v != "" {
		cfgs, err := s.catalog.Configurations(r.Context())
		if err != nil {
			return rq, err
		}
		for _, c := range cfgs {
			if c.Identifier == v {
				rq.ConfigurationID = c.ID
			}
		}
		if rq.ConfigurationID == 0 {
			return rq, invalid(fmt.Sprintf("no configuration %q", v))
		}
	}
	if v := q.Get("owner"); v != "" {
		if actor.Role != runtime.RoleAdmin {
			return rq, invalid("only admins filter by owner; you see your own runs and the ones you decided")
		}
		u, err := s.users.UserByName(r.Context(), v)
		if err != nil {
			return rq, invalid(fmt.Sprintf("no user %q", v))
		}
		rq.OwnerID = u.ID
	}
	switch v := q.Get("decided_by"); v {
	case "":
	case "me":
		rq.DecidedByMe = true
	default:
		return rq, invalid(`decided_by takes only "me"`)
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return rq, invalid("before must be the next cursor of the page before")
		}
		rq.Before = n
	}
	return rq, nil
}

// history is GET /runs: the runs the user may see, newest first, a page
// at a time, with the filters of runQuery.
func (s *Server) history(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	actor := currentUser(r).Actor()
	q, err := s.runQuery(r, actor)
	if err != nil {
		s.refuse(w, r, s.at.history, 0, err)
		return
	}
	q.Limit = historyPageSize
	cursor := s.feedCursor(r.Context()) // before the read: nothing after it is missed
	page, err := s.engine.History(r.Context(), actor, q)
	if err != nil {
		s.refuse(w, r, s.at.page, 0, err)
		return
	}
	cfgs, err := s.catalog.Configurations(r.Context())
	if err != nil {
		s.refuse(w, r, s.at.page, 0, err)
		return
	}
	v := templates.HistoryPage{Page: s.pageFor(r, "Runs"), Admin: actor.Role == runtime.RoleAdmin,
		Filter: templates.HistoryFilter{Status: r.URL.Query().Get("status"), Configuration: r.URL.Query().Get("configuration"),
			Owner: r.URL.Query().Get("owner"), Mine: q.DecidedByMe}}
	v.FeedCursor = cursor
	for _, st := range statuses {
		v.Filter.Statuses = append(v.Filter.Statuses, templates.Option{Value: string(st), Label: templates.StatusText(string(st))})
	}
	for _, c := range cfgs {
		v.Filter.Configurations = append(v.Filter.Configurations, templates.Option{Value: c.Identifier, Label: c.Name})
	}
	for _, l := range page.Runs {
		row := templates.HistoryRun{ID: l.Run.ID, Configuration: l.Configuration.Name, Status: string(l.Run.Status),
			Reason: templates.ReasonText(l.Run.TerminationReason), CreatedAt: l.Run.CreatedAt, UpdatedAt: l.Run.UpdatedAt, CanOpen: l.MayRead}
		if l.MayRead {
			row.Owner, row.Title = l.Run.OwnerName, l.Run.Title
		}
		if l.Erased {
			// A state a person reads, with nothing of what it said, and no
			// page to open.
			row.Status, row.Reason, row.CanOpen = "erased", "", false
		}
		if l.Decision != nil {
			row.Decision = decisionVerb(l.Decision.Kind)
			row.DecidedAt = l.Decision.DecidedAt
		}
		if l.Rule != nil {
			row.Rule = ruleDecisionText(l.Rule)
		}
		v.Runs = append(v.Runs, row)
	}
	if page.Next != 0 {
		next := r.URL.Query()
		next.Set("before", strconv.FormatInt(page.Next, 10))
		v.Next = "/runs?" + url.Values(next).Encode()
	}
	s.render(w, r, http.StatusOK, templates.History(v))
}
