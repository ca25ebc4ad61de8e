package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/templates"
)

// A losing duplicate learns what happened. A decision whose turn someone
// else won is refused as already_resuming with the winning decision (who,
// how, when) and the run's status: the plain answers say so (the flash, the
// API's 409 body; see refusals.go). A streamed one is not refused at all:
// it follows the winner's continuation to its end. Its first line is
//
//	{"type":"following","run_id":…,"decision":{"by","kind","scope","decided_at"},"status":…}
//
// and then the surface's own lines, as the winner's stream sends them
// (progress counts in the inbox, step lines in the playground and the
// API, keepalives) and its own last line: settled, or the outcome. The
// lines come from the run's stored events, read on a ticker, so they
// follow a continuation of any process, a worker's too; a step's content
// is the stored (privacy-filtered) payload, and only for who may read the
// run. A follower runs nothing: when its client leaves it stops.

// decisionSummaryJSON is the winning decision in an API answer.
type decisionSummaryJSON struct {
	By        string `json:"by"`
	Kind      string `json:"kind"`
	Scope     string `json:"scope"`
	DecidedAt string `json:"decided_at"`
	Reason    string `json:"reason,omitempty"`
}

func decidedJSON(d *runtime.DecisionSummary) decisionSummaryJSON {
	return decisionSummaryJSON{By: d.By, Kind: d.Kind, Scope: d.Scope,
		DecidedAt: d.DecidedAt.UTC().Format(timeFormat), Reason: d.Reason}
}

// followingLine is a follower's first line.
type followingLine struct {
	Type     string              `json:"type"`
	RunID    int64               `json:"run_id"`
	Decision decisionSummaryJSON `json:"decision"`
	Status   runtime.Status      `json:"status"`
}

// decidedWords says what the winner did: "approved by alice at 14:02:05
// UTC", "denied at 14:02:05 UTC" for a decision by nobody.
func decidedWords(d *runtime.DecisionSummary) string {
	verb := decisionVerb(d.Kind)
	if verb == "" {
		verb = "decided"
	}
	if d.Kind == runtime.DecisionApprove && d.Scope == runtime.ScopeSession {
		verb = "approved for the rest of the run"
	}
	if d.By != "" {
		verb += " by " + d.By
	}
	return verb + " at " + d.DecidedAt.UTC().Format("15:04:05") + " UTC"
}

// decidedFlash is the flash of a lost claim: "Run 7 was already approved
// by alice at 14:02:05 UTC; it is running."
func decidedFlash(id int64, d *runtime.DecisionSummary) string {
	return fmt.Sprintf("Run %d was already %s; it is %s.", id, decidedWords(d), statusWords(d.Status))
}

// statusWords is a run's status in a sentence.
func statusWords(st runtime.Status) string {
	if st == runtime.StatusDecided {
		return "waiting for a worker to continue it"
	}
	return templates.StatusText(string(st))
}

// followed answers a refusal that a streamed request may follow instead:
// a lost claim whose winning decision is known. It reports whether it
// answered. A follower runs no continuation, so it gives its continuation
// slot back (release) first: followers are bounded by the server's
// connections, not by --max-continuations.
func (s *Server) followed(w http.ResponseWriter, r *http.Request, sf decider, id int64, err error, release func()) bool {
	var ref *runtime.Refusal
	if !errors.As(err, &ref) || ref.Code != runtime.CodeAlreadyResuming || ref.Decided == nil {
		return false
	}
	f := &follower{s: s, id: id, actor: actorOf(r), sum: ref.Decided, release: release}
	return sf.follow(w, r, f)
}

// follower is a runner that follows the continuation someone else's
// decision started, through Engine.Follow.
type follower struct {
	s     *Server
	id    int64
	actor runtime.Actor
	sum   *runtime.DecisionSummary
	// release gives the request's continuation slot back, once it is
	// certain the request follows (it may be called more than once).
	release func()
}

func (f *follower) firstLine() followingLine {
	return followingLine{Type: lineFollowing, RunID: f.id, Decision: decidedJSON(f.sum), Status: f.sum.Status}
}

// Run sends every event the winner's continuation records to obs as a
// step, and returns the run's outcome once it waits or is settled. It
// reads what was recorded since the decision once (Engine.Follow), then
// waits on the process's feed, and reads the run once more at its end for
// the outcome. It stops when ctx ends (the client left): its outcome then
// says the run continues elsewhere, as it does when the store stays
// unreadable.
// Turn is the conversation's turn of the decision the follower follows.
func (f *follower) Turn() int { return f.sum.Turn }

func (f *follower) Run(ctx context.Context, obs runtime.Observer) runtime.Outcome {
	if f.release != nil {
		f.release()
	}
	running := func(err error) runtime.Outcome {
		return runtime.Outcome{RunID: f.id, Status: runtime.StatusRunning, Err: err}
	}
	show := func(evs []runtime.Event) {
		for _, ev := range evs {
			if !ev.Kind.Step() {
				continue // as the winner's stream, which is told of steps only
			}
			st := runtime.Step{Event: ev}
			if f.sum.MayRead {
				st.Full = ev.Payload
			}
			obs.OnStep(st)
		}
	}
	last := 0
	for {
		got, err := f.look(ctx, last)
		if err != nil {
			return running(err)
		}
		show(got.Events)
		last = got.Last
		if got.Outcome != nil {
			return *got.Outcome
		}
		// Every event after last was recorded after this look, so after
		// the decision: the feed's are all the winner's.
		w := f.s.events.Watch(f.id, last)
		for {
			u, err := w.Next(ctx)
			if err != nil {
				w.Close()
				return running(err)
			}
			if u.Ended != "" {
				break
			}
			show(u.Events)
			if n := len(u.Events); n > 0 {
				last = u.Events[n-1].Seq
			}
			if d, ok := obs.(runtime.DeltaObserver); ok && f.sum.MayRead {
				// The winner's text, while this process holds its run.
				for _, x := range u.Deltas {
					d.OnDelta(x)
				}
			}
		}
		w.Close()
	}
}

// look is one Engine.Follow, retried while the store fails, for
// followGiveUp at most.
func (f *follower) look(ctx context.Context, last int) (runtime.Followed, error) {
	var failingSince time.Time
	for {
		got, err := f.s.engine.Follow(ctx, f.id, f.actor, f.sum.DecidedAt, last)
		if err == nil || ctx.Err() != nil {
			return got, err
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		f.s.log.Warn("following a decision failed", "run", f.id, "err", err)
		if time.Since(failingSince) >= followGiveUp {
			return got, err
		}
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-time.After(runtime.FollowInterval):
		}
	}
}

// followedFlash says how a followed continuation ended: "Run 7 was
// approved by alice at 14:02:05 UTC; run 7 completed: the agent finished."
func followedFlash(d *runtime.DecisionSummary, out runtime.Outcome) string {
	ended := endedWords(out.RunID, out.Status, out.Reason)
	if out.Status == runtime.StatusRunning {
		ended = fmt.Sprintf("run %d continues in the background.", out.RunID)
	}
	return fmt.Sprintf("Run %d was %s; %s", out.RunID, decidedWords(d), ended)
}
