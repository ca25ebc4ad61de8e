package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/templates"
)

// inboxPageSize is how many waiting runs one inbox page shows.
const inboxPageSize = 50

// inbox is GET /inbox?before=<cursor>&configuration=<identifier>&tool=<name>:
// a page of the runs the user may decide, oldest first, with how many wait
// in all and a link to the next page, so that no waiting run is out of
// reach. It never reloads itself; with JavaScript it follows the feed
// (see inbox_live.go).
func (s *Server) inbox(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	wq := runtime.WaitingQuery{Limit: inboxPageSize, Tool: q.Get("tool")}
	if c := q.Get("before"); c != "" {
		cursor, err := runtime.ParseWaitingCursor(c)
		if err != nil {
			s.errorMessage(w, r, http.StatusBadRequest, "This page address is not one of the inbox's. Start again from the inbox.")
			return
		}
		wq.After = cursor
	}
	cfgs, err := s.catalog.Configurations(r.Context())
	if err != nil {
		s.refuse(w, r, s.at.page, 0, err)
		return
	}
	filter := templates.InboxFilter{Configuration: q.Get("configuration"), Tool: wq.Tool}
	for _, c := range cfgs {
		filter.Configurations = append(filter.Configurations, templates.Option{Value: c.Identifier, Label: c.Name})
		if c.Identifier == filter.Configuration {
			wq.ConfigurationID = c.ID
		}
	}
	if filter.Configuration != "" && wq.ConfigurationID == 0 {
		wq.ConfigurationID = -1 // no such configuration: nothing waits on it
	}
	actor := currentUser(r).Actor()
	cursor := s.feedCursor(r.Context()) // before the read: nothing after it is missed
	pending, err := s.engine.Pending(r.Context(), actor, wq)
	if err != nil {
		s.refuse(w, r, s.at.page, 0, err)
		return
	}
	continuing, err := s.continuing(r.Context(), actor)
	if err != nil {
		s.refuse(w, r, s.at.page, 0, err)
		return
	}
	page := templates.InboxPage{Page: s.pageFor(r, "Inbox"), Now: time.Now(), Total: pending.Total,
		Filter: filter, Continuing: continuing}
	page.FeedCursor, page.Later = cursor, q.Get("before") != ""
	if pending.Next != nil {
		next := url.Values{"before": {pending.Next.String()}}
		if filter.Configuration != "" {
			next.Set("configuration", filter.Configuration)
		}
		if filter.Tool != "" {
			next.Set("tool", filter.Tool)
		}
		page.Next = "/inbox?" + next.Encode()
	}
	for _, p := range pending.Runs {
		page.Runs = append(page.Runs, s.inboxRun(actor, p, nil))
	}
	bulkSelection(r, &page)
	s.render(w, r, http.StatusOK, templates.Inbox(page))
}

// continuingList is GET /inbox/continuing: the user's runs that continue in
// the background, as the inbox shows them, for inbox.js to keep that part
// of the page current without reloading what the user types into.
func (s *Server) continuingList(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	continuing, err := s.continuing(r.Context(), currentUser(r).Actor())
	if err != nil {
		s.refuse(w, r, s.at.page, 0, err)
		return
	}
	s.render(w, r, http.StatusOK, templates.Continuing(continuing))
}

func (s *Server) continuing(ctx context.Context, actor runtime.Actor) ([]templates.ContinuingRun, error) {
	runs, err := s.engine.Continuing(ctx, actor)
	if err != nil {
		return nil, err
	}
	out := make([]templates.ContinuingRun, len(runs))
	for i, c := range runs {
		out[i] = templates.ContinuingRun{ID: c.Run.ID, Configuration: c.Configuration.Name, Status: string(c.Run.Status)}
	}
	return out, nil
}

// formState is a refused input form to show again: the user's values and
// one message per field.
type formState struct {
	values map[string][]string
	fields map[string]string
	msg    string
}

// inboxRun is a waiting run as the inbox card shows it to an actor: the
// prompt and what the model said only to who may read the run.
func (s *Server) inboxRun(actor runtime.Actor, p runtime.PendingRun, refused *formState) templates.InboxRun {
	run := templates.InboxRun{ID: p.Run.ID, Configuration: p.Configuration.Name, Owner: p.Run.OwnerName,
		Kind: p.Turn.Kind, Digest: p.Run.TurnDigest, Note: p.Turn.Note,
		SecondApprover: p.Configuration.RequireSecondApprover,
		FourEyes:       p.Configuration.RequireSecondApprover && p.Run.OwnerID == actor.ID,
		CanOpen:        actor.MayRead(p.Run.OwnerID)}
	if run.CanOpen {
		run.Title, run.Prompt, run.Said = p.Run.Title, p.Run.Prompt, p.Said
	}
	if p.Run.WaitingSince != nil {
		run.WaitingSince = *p.Run.WaitingSince
	}
	if p.Run.DecisionDeadline != nil {
		run.Deadline = *p.Run.DecisionDeadline
	}
	run.EscalatedTo = p.Turn.Escalated
	run.EscalatedAway = run.EscalatedTo != "" && !actor.Has(run.EscalatedTo)
	run.Votes = votesLine(p.Turn.ApprovalsRequired, p.Run.Votes)
	for _, c := range p.Turn.Calls {
		call := templates.Call{ID: c.ID, Name: c.Name, Preview: p.Turn.Previews[c.ID],
			Args: argRows(c.Arguments), Arguments: indent(c.Arguments), Rule: ruleNote(&p.Turn, c.ID)}
		if t, ok := s.engine.Tool(c.Name); ok {
			call.Description = t.Spec().Description
		}
		// A turn that needs several approvals is approved whole and as
		// offered, each approval a vote: neither edits nor choices per call.
		if p.Turn.Kind == runtime.TurnApproval && !run.FourEyes && p.Turn.ApprovalsRequired <= 1 {
			call.Edit = editView(c, p.Parameters[c.Name], len(p.Turn.Calls)-1, refused)
			if len(p.Turn.Calls) > 1 {
				call.Choice = callChoice(c.ID, refused)
			}
		}
		run.Calls = append(run.Calls, call)
	}
	if p.Turn.Kind == runtime.TurnApproval && refused != nil {
		run.Error = editRefusal(p.Turn, refused)
	}
	if p.Turn.Kind == runtime.TurnInput {
		var values map[string][]string
		var errs map[string]string
		if refused != nil {
			values, errs, run.Error = refused.values, refused.fields, refused.msg
		}
		run.Fields = inputFields(p.Turn.Schema, values, errs)
	}
	return run
}

// argRows turns a call's arguments into table rows, keys sorted; an
// object or a list inside becomes rows of its own, shown folded.
func argRows(raw json.RawMessage) []templates.Arg {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	return rowsOf(m)
}

func rowsOf(m map[string]any) []templates.Arg {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([]templates.Arg, len(keys))
	for i, k := range keys {
		rows[i] = argRow(k, m[k])
	}
	return rows
}

func argRow(key string, v any) templates.Arg {
	switch v := v.(type) {
	case map[string]any:
		return templates.Arg{Key: key, Value: fmt.Sprintf("%d fields", len(v)), Nested: rowsOf(v)}
	case []any:
		a := templates.Arg{Key: key, Value: fmt.Sprintf("%d items", len(v))}
		for i, e := range v {
			a.Nested = append(a.Nested, argRow(fmt.Sprint(i+1), e))
		}
		return a
	case nil:
		return templates.Arg{Key: key, Value: "null"}
	case string:
		return templates.Arg{Key: key, Value: v}
	default:
		return templates.Arg{Key: key, Value: fmt.Sprint(v)}
	}
}

// inputFields turns an input schema into form fields, with the values and
// errors of a refused submission.
func inputFields(sch json.RawMessage, values map[string][]string, errs map[string]string) []templates.Field {
	fields, err := schema.Fields(sch)
	if err != nil {
		return nil
	}
	out := make([]templates.Field, len(fields))
	for i, f := range fields {
		out[i] = templates.Field{Name: f.Name, Label: f.Title, Description: f.Description, Type: f.Type,
			Enum: f.Enum, Required: f.Required, Min: f.Minimum, Max: f.Maximum, Error: errs[f.Name]}
		if v := values[f.Name]; len(v) > 0 {
			out[i].Value = v[0]
		}
	}
	return out
}

func indent(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// inboxRunPage is GET /inbox/runs/:id, one run for a decider (the page
// notifications link to, and where a decision without JavaScript lands):
// while it waits, its card and forms; after the user's decision, what the
// decision did and how the run stands, reloading itself (it has no forms)
// until the run pauses or settles. To anyone who may not decide the run,
// it does not exist.
func (s *Server) inboxRunPage(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.page, ps)
	if !ok {
		return
	}
	s.renderInboxRun(w, r, http.StatusOK, id, nil)
}

// renderInboxRun renders a run's own page, with a refused input form
// filled in again when there is one.
func (s *Server) renderInboxRun(w http.ResponseWriter, r *http.Request, status int, id int64, refused *formState) {
	actor := currentUser(r).Actor()
	page := templates.InboxRunPage{Page: s.pageFor(r, fmt.Sprintf("Run %d", id)), Now: time.Now()}
	p, err := s.engine.PendingOne(r.Context(), id, actor)
	switch runtime.CodeOf(err) {
	case "":
		if err != nil {
			s.refuse(w, r, s.at.page, id, err)
			return
		}
		run := s.inboxRun(actor, p, refused)
		page.Run = &run
	case runtime.CodeNotWaiting:
		d, err := s.engine.DecidedBy(r.Context(), id, actor)
		if runtime.CodeOf(err) == runtime.CodeNotFound {
			// Someone else decided it, or nobody did and it is gone.
			name := ""
			if p.Configuration != nil {
				name = p.Configuration.Name
			}
			page.Decided = &templates.DecidedView{RunID: id, Configuration: name,
				Summary: fmt.Sprintf("Run %d no longer waits for a decision; it is %s.", id, templates.StatusText(string(p.Run.Status)))}
			break
		}
		if err != nil {
			s.refuse(w, r, s.at.page, id, err)
			return
		}
		page.Decided = decidedView(d)
		if page.Decided.Continuing {
			page.Refresh = 2
		}
	default:
		s.refuse(w, r, s.at.page, id, err)
		return
	}
	s.render(w, r, status, templates.InboxRunView(page))
}

// decidedView says what a user's decision did, and how its run stands.
func decidedView(d runtime.DecidedRun) *templates.DecidedView {
	v := &templates.DecidedView{RunID: d.Run.ID, Configuration: d.Configuration.Name}
	did := decisionWords(d.Decision.Kind, strings.Split(d.Decision.Tools, ","))
	switch st := d.Run.Status; {
	case st == runtime.StatusRunning || st == runtime.StatusDecided || st == runtime.StatusQueued:
		v.Continuing = true
		v.Summary = fmt.Sprintf("%s; run %d continues…", did, d.Run.ID)
	default:
		v.Summary = fmt.Sprintf("%s; %s", did, endedWords(d.Run.ID, st, d.Run.TerminationReason))
	}
	return v
}

// decisionWords says what a decision did: "You denied refund_order".
func decisionWords(kind string, tools []string) string {
	what := strings.Join(tools, " and ")
	if what == "" {
		what = "the pending turn"
	}
	if kind == runtime.DecisionMixed {
		return "You decided " + what + " call by call"
	}
	return "You " + decisionVerb(kind) + " " + what
}

// decisionVerb is a decision's kind as a verb: "approved".
func decisionVerb(kind string) string {
	return map[string]string{runtime.DecisionApprove: "approved", runtime.DecisionDeny: "denied",
		runtime.DecisionMixed: "decided call by call", runtime.DecisionInput: "answered"}[kind]
}

// endedWords says how a run stands after a continuation: "run 9
// completed: the agent finished".
func endedWords(id int64, st runtime.Status, reason string) string {
	switch {
	case st == runtime.StatusCompleted:
		return fmt.Sprintf("run %d completed: %s.", id, templates.ReasonText(reason))
	case st.Waiting():
		return fmt.Sprintf("run %d continued and waits for a decision again.", id)
	case st == runtime.StatusFailed:
		return fmt.Sprintf("run %d failed: %s.", id, templates.ReasonText(reason))
	case st == runtime.StatusCancelled:
		return fmt.Sprintf("run %d was cancelled.", id)
	case st == runtime.StatusDecided || st == runtime.StatusQueued:
		return fmt.Sprintf("run %d was handed over to a worker while this server stops; it continues in the background.", id)
	}
	return fmt.Sprintf("run %d continues in the background.", id)
}

// decision approves or denies a pending turn from the inbox.
func (s *Server) decision(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.inbox, ps)
	if !ok {
		return
	}
	req := approvalForm(r, id)
	req.Inbox = true
	s.decide(w, r, s.at.inbox, id, s.approval(req))
}

// input answers an input turn from the inbox.
func (s *Server) input(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id, ok := s.runParam(w, r, s.at.inbox, ps)
	if !ok {
		return
	}
	req := inputForm(r, id)
	req.Inbox = true
	s.decide(w, r, s.at.inbox, id, s.answering(req))
}

// outcomeFlash says what a decision did and how its continuation ended:
// "You denied refund_order; run 9 completed: the agent finished."
func outcomeFlash(kind string, tools []string, out runtime.Outcome) string {
	ended := endedWords(out.RunID, out.Status, out.Reason)
	if out.Status == runtime.StatusRunning {
		ended = fmt.Sprintf("run %d continues in the background.", out.RunID)
	}
	if kind == "" {
		return strings.ToUpper(ended[:1]) + ended[1:]
	}
	return decisionWords(kind, tools) + "; " + ended
}

// ruleNote says which rule of the policy asked for votes on a call, and
// how many approvals the turn needs: "rule big-refunds: 2 approvals".
func ruleNote(turn *runtime.PendingTurn, callID string) string {
	name, ok := turn.Rules[callID]
	if !ok {
		return ""
	}
	return fmt.Sprintf("rule %s: %d approvals", name, max(turn.ApprovalsRequired, 1))
}

// ruleDecisionText says what a rule of the policy decided, for a list:
// "approved by policy:small-refunds: small refunds of one's own orders".
func ruleDecisionText(r *runtime.ListedRule) string {
	text := decisionVerb(r.Kind) + " by " + runtime.PolicyDecider(r.Policy)
	if r.Reason != "" {
		text += ": " + r.Reason
	}
	return text
}
