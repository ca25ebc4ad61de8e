package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/julienschmidt/httprouter"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// Bulk decisions: POST /inbox/decisions (a form, one run field per
// selected card) and POST /api/decisions (JSON). A bulk whose shape is
// wrong — a malformed or repeated run, none or more than runtime.MaxBulk,
// a bad decision or scope, a mix of approvals and denials — is refused
// whole with invalid_bulk (400) and writes nothing. Otherwise each run
// goes through the whole pipeline on its own (Engine.DecideMany): a
// refusal of one is that run's line or result and stops none of the
// others. Streamed, one response carries every run's progress (counts
// only); the continuations run at once within the --max-continuations
// slots, those beyond them on the durable path while a worker lives, else
// each as a slot frees up. Without a stream the durable path takes them
// all while a worker lives, else they run in the request, and the answer
// counts what was claimed and refused. The paths are chosen, and the
// slots taken, once every run's checks are done: a slot for each run
// about to be claimed, none for the runs refused (and those of a claim
// lost go back at once).

// codeInvalidBulk: the bulk itself is malformed; nothing was decided.
const codeInvalidBulk runtime.Code = "invalid_bulk"

// The lines only a bulk stream sends.
const (
	lineClaimed = "claimed" // bulk: the first line
	lineDone    = "done"    // bulk: the last line
)

// claimedLine is a bulk stream's first line: the runs claimed, and those
// refused with their codes.
type claimedLine struct {
	Type    string        `json:"type"`
	Runs    []int64       `json:"runs"`
	Refused []refusedJSON `json:"refused"`
	// Voted are the approvals recorded as votes that claimed nothing.
	Voted []votedJSON `json:"voted,omitempty"`
}

type refusedJSON struct {
	Run     int64  `json:"run"`
	Code    string `json:"code"`
	Message string `json:"message,omitempty"`
}

// bulkProgressLine counts one run's steps; bulkSettledLine says the stream
// is done with a run: its continuation ended here, or (path durable) a
// worker carries it out.
type bulkProgressLine struct {
	Type  string `json:"type"`
	Run   int64  `json:"run"`
	Steps int    `json:"steps"`
}

type bulkSettledLine struct {
	Type string `json:"type"`
	Run  int64  `json:"run"`
	Path string `json:"path,omitempty"`
}

type bulkDoneLine struct {
	Type    string `json:"type"`
	Settled int    `json:"settled"`
	Refused int    `json:"refused"`
}

// bulkResult is one run of a non-streamed API bulk.
type bulkResult struct {
	RunID   int64  `json:"run_id"`
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	// A vote's count (status "voted"): see votedJSON.
	ApprovalsRequired int           `json:"approvals_required,omitempty"`
	Votes             runtime.Votes `json:"votes,omitempty"`
}

// inboxBulk is POST /inbox/decisions.
func (s *Server) inboxBulk(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	reqs, err := bulkFormRequests(r)
	if err != nil {
		s.refuse(w, r, s.at.inbox, 0, err)
		return
	}
	s.decideMany(w, r, s.at.inbox, reqs)
}

// apiBulk is POST /api/decisions.
func (s *Server) apiBulk(w http.ResponseWriter, r *http.Request, _ httprouter.Params, actor runtime.Actor) {
	var body bulkBody
	err := decodeJSON(w, r, &body)
	var reqs []runtime.DecideRequest
	if err == nil {
		reqs, err = apiBulkRequests(body, actor)
	}
	if err != nil {
		s.refuse(w, r, s.at.api, 0, err)
		return
	}
	s.decideMany(w, r, s.at.api, reqs)
}

// bulkPaths chooses the paths of the n runs of a bulk about to be
// claimed, and takes the slots of those that run in the request now; see
// the comment at the top. It returns errBusy when no run could go
// anywhere: no slot is free and no worker lives.
func (s *Server) bulkPaths(ctx context.Context, n int, stream bool) (paths []string, held []func(), err error) {
	p := s.admission
	paths = make([]string, n)
	fill := func(from int, path string) {
		for i := from; i < n; i++ {
			paths[i] = path
		}
	}
	if p.mode == PathDurable || (p.mode == PathAuto && !stream && p.workerAlive(ctx)) {
		fill(0, runtime.PathDurable)
		return paths, nil, nil
	}
	for len(held) < n {
		release, ok := p.acquire()
		if !ok {
			break
		}
		held = append(held, release)
	}
	fill(0, runtime.PathRequest)
	if len(held) < n && p.mode != PathRequest && p.workerAlive(ctx) {
		fill(len(held), runtime.PathDurable)
	} else if len(held) == 0 {
		return nil, nil, errBusy
	}
	return paths, held, nil
}

// decideMany carries a bulk through the pipeline and answers it on sf.
func (s *Server) decideMany(w http.ResponseWriter, r *http.Request, sf surface, reqs []runtime.DecideRequest) {
	stream := wantsStream(r)
	var held []func()
	var busy error
	res := s.engine.DecideMany(r.Context(), reqs, func(n int) ([]string, error) {
		paths, h, err := s.bulkPaths(r.Context(), n, stream)
		held, busy = h, err
		return paths, err
	})
	if busy != nil {
		// Nothing was claimed: the bulk is refused whole, as it would be
		// had it named only the runs that passed their checks.
		s.refuse(w, r, sf, 0, busy)
		return
	}

	var claimed []int64
	var refused []refusedJSON
	var conts []*runtime.Continuation
	var durable []int64
	var failure error
	var voted []votedJSON
	for _, d := range res {
		if d.Voted != nil {
			voted = append(voted, toVotedJSON(d.Voted))
			continue
		}
		if d.Err != nil {
			code := runtime.CodeOf(d.Err)
			if code == "" {
				failure = d.Err
				s.log.Error("bulk decision", "run", d.RunID, "err", d.Err)
				code = codeInternal
			}
			if code != codeInternal {
				s.metrics.Refused(sf.name(), string(code))
			}
			refused = append(refused, refusedJSON{Run: d.RunID, Code: string(code), Message: refusalMessage(d.Err)})
			continue
		}
		claimed = append(claimed, d.RunID)
		if d.Continuation != nil {
			conts = append(conts, d.Continuation)
		} else {
			durable = append(durable, d.RunID)
		}
	}
	if failure != nil && len(claimed) == 0 && len(voted) == 0 {
		// Nothing went through because the database failed: a 500, not a
		// list of runs that each "failed".
		for _, release := range held {
			release()
		}
		s.refuse(w, r, sf, 0, failure)
		return
	}
	// Slots held for runs that were refused go back at once.
	if len(conts) < len(held) {
		for _, release := range held[len(conts):] {
			release()
		}
		held = held[:len(conts)]
	}
	b := bulkRun{s: s, conts: conts, held: held}
	if !stream {
		outs := b.run(r.Context(), nil)
		s.bulkAnswer(w, r, sf, reqs[0].Decision, res, claimed, refused, voted, outs)
		return
	}
	st := s.startStream(w)
	if refused == nil {
		refused = []refusedJSON{}
	}
	if claimed == nil {
		claimed = []int64{}
	}
	st.send(lineClaimed, claimedLine{Type: lineClaimed, Runs: claimed, Refused: refused, Voted: voted})
	for _, id := range durable {
		st.send(lineSettled, bulkSettledLine{Type: lineSettled, Run: id, Path: runtime.PathDurable})
	}
	stop := st.keepalives(s.keepalive, func() any { return typeLine{Type: lineKeepalive} })
	defer stop()
	outs := b.run(r.Context(), st)
	if sf.html(r) {
		// As the single stream does: the flash is stored before the last
		// line sends the page to /inbox, on a context of its own, since
		// the client may have gone; keepalives go on while it waits for
		// the database.
		ctx := context.WithoutCancel(r.Context())
		s.flash(ctx, bulkFlash(reqs[0].Decision, claimed, len(durable) > 0, refused, outs)+votesFlash(voted))
		if _, _, err := s.sessions.Commit(ctx); err != nil {
			s.log.Warn("save flash", "err", err)
		}
	}
	stop()
	st.send(lineDone, bulkDoneLine{Type: lineDone, Settled: len(claimed), Refused: len(refused)})
}

// refusalMessage is a refusal's own words; nothing of another error.
func refusalMessage(err error) string {
	if ref, ok := err.(*runtime.Refusal); ok {
		return ref.Message
	}
	return "something went wrong on our side"
}

// bulkRun runs a bulk's continuations in the request, each in a slot of
// its own: first the slots held, then each as a slot frees up.
type bulkRun struct {
	s     *Server
	conts []*runtime.Continuation
	held  []func()
}

// run runs every continuation to its end, concurrently, telling st (when
// not nil) of their steps and ends, and returns their outcomes. The
// continuations go on when the client leaves (Continuation.Run).
func (b bulkRun) run(ctx context.Context, st *stream) []runtime.Outcome {
	outs := make([]runtime.Outcome, len(b.conts))
	var wg sync.WaitGroup
	for _, c := range b.conts {
		c.Hold() // those beyond the held slots wait for one, claimed
	}
	for i, c := range b.conts {
		release := b.s.admission.waitSlot
		if i < len(b.held) {
			held := b.held[i]
			release = func() func() { return held }
		}
		done := release()
		wg.Go(func() {
			defer done()
			var obs runtime.Observer
			if st != nil {
				steps := 0
				obs = runtime.ObserverFunc(func(runtime.Step) {
					steps++
					st.send(lineProgress, bulkProgressLine{Type: lineProgress, Run: c.RunID(), Steps: steps})
				})
			}
			outs[i] = c.Run(ctx, obs)
			if st != nil {
				st.send(lineSettled, bulkSettledLine{Type: lineSettled, Run: c.RunID()})
			}
		})
	}
	wg.Wait()
	return outs
}

// bulkAnswer answers a bulk that was not streamed: the inbox with a 303
// and a flash counting what was claimed and refused, the API with the
// result of every run in order.
func (s *Server) bulkAnswer(w http.ResponseWriter, r *http.Request, sf surface, decision string, res []runtime.Decided,
	claimed []int64, refused []refusedJSON, voted []votedJSON, outs []runtime.Outcome) {
	if sf.html(r) {
		s.flash(r.Context(), bulkFlash(decision, claimed, len(outs) < len(claimed), refused, outs)+votesFlash(voted))
		http.Redirect(w, r, "/inbox", http.StatusSeeOther)
		return
	}
	results := make([]bulkResult, len(res))
	for i, d := range res {
		results[i] = bulkResult{RunID: d.RunID, Status: "claimed"}
		if v := d.Voted; v != nil {
			results[i] = bulkResult{RunID: d.RunID, Status: "voted", ApprovalsRequired: v.Required, Votes: v.Votes}
		}
		if d.Err != nil {
			code := runtime.CodeOf(d.Err)
			if code == "" {
				code = codeInternal
			}
			results[i].Status, results[i].Message = string(code), refusalMessage(d.Err)
		}
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"results": results})
}

// bulkFlash counts what a bulk did: "Approved 2 runs; they continue in
// the background. 1 refused: The pending action of run 7 changed; review
// it again."
func bulkFlash(decision string, claimed []int64, background bool, refused []refusedJSON, outs []runtime.Outcome) string {
	verb := "Approved"
	if decision == runtime.DecisionDeny {
		verb = "Denied"
	}
	var b strings.Builder
	if len(claimed) == 0 {
		b.WriteString("No run was decided.")
	} else {
		fmt.Fprintf(&b, "%s %d %s", verb, len(claimed), map[bool]string{true: "run", false: "runs"}[len(claimed) == 1])
		var ended map[string]int
		for _, o := range outs {
			if ended == nil {
				ended = map[string]int{}
			}
			ended[templates.StatusText(string(o.Status))]++
		}
		var parts []string
		for _, st := range []runtime.Status{runtime.StatusCompleted, runtime.StatusWaitingForApproval,
			runtime.StatusWaitingForInput, runtime.StatusFailed, runtime.StatusCancelled} {
			if n := ended[templates.StatusText(string(st))]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, templates.StatusText(string(st))))
			}
		}
		switch {
		case background:
			b.WriteString("; they continue in the background.")
		case len(parts) > 0:
			b.WriteString(": " + strings.Join(parts, ", ") + ".")
		default:
			b.WriteString(".")
		}
	}
	if len(refused) > 0 {
		fmt.Fprintf(&b, " %d refused:", len(refused))
		for i, ref := range refused {
			if i == 3 {
				fmt.Fprintf(&b, " and %d more.", len(refused)-i)
				break
			}
			b.WriteString(" " + refusalFlash(ref))
		}
	}
	return b.String()
}

// refusalFlash is one refused run in the words of the one table.
func refusalFlash(ref refusedJSON) string {
	row, ok := answers[runtime.Code(ref.Code)]
	if ok && row.flash != "" {
		return fmt.Sprintf(row.flash, ref.Run, ref.Message)
	}
	if ref.Code == string(runtime.CodeNotFound) {
		return fmt.Sprintf("There is no run %d you may decide.", ref.Run)
	}
	return fmt.Sprintf("Run %d: %s", ref.Run, sentence(ref.Message))
}

// bulkSelection marks the cards of an inbox page that a bulk may decide,
// all of them checked with ?select=all (select all on this page without
// JavaScript), and gives the page its links to select all or none.
func bulkSelection(r *http.Request, page *templates.InboxPage) {
	q := r.URL.Query()
	all := q.Get("select") == "all"
	for i := range page.Runs {
		run := &page.Runs[i]
		run.Selectable = run.Kind == runtime.TurnApproval && !run.EscalatedAway
		run.Selected = all && run.Selectable
		page.Bulk = page.Bulk || run.Selectable
	}
	page.SelectAll = all
	q.Del("select")
	none := "/inbox"
	if len(q) > 0 {
		none += "?" + q.Encode()
	}
	q.Set("select", "all")
	page.SelectAllURL, page.SelectNoneURL = "/inbox?"+q.Encode(), none
}
