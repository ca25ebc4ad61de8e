package web

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// The one decision flow. Every surface that decides — the inbox, the
// playground, the JSON API, each a type of its own in a surface_*.go
// file — sends its decisions through decide: the path is chosen before
// anything is claimed (in this request, or a worker's; see admission), the
// engine runs its pipeline, and then the surface answers as it says: a
// refusal through the one table (refuse), a decision a worker carries
// out, or the continuation run in this request.

// A surface is where a request comes from, and how its refusals are
// answered (see refuse): every handler answers on one. The decision
// surfaces are deciders; the run page and the history are only surfaces.
type surface interface {
	// name labels the surface's refusals in the metrics; "" counts none.
	name() string
	// html reports whether the request is answered with pages (else JSON).
	html(r *http.Request) bool
	// back is where a page's refusal sends the user, with its flash.
	back(id int64) string
	// ownWords reports whether the flash of a refusal is the refusal's
	// own message rather than the table's (the run page's cancel, whose
	// messages are written for people).
	ownWords() bool
}

// A decider is a surface that decisions come from: the flow (decide) asks
// it which path the request would have its continuation take, and answers
// through it.
type decider interface {
	surface
	// want says what the request would have of its continuation's path.
	want(r *http.Request) want
	// recorded answers a decision the durable path took.
	recorded(w http.ResponseWriter, r *http.Request, id int64)
	// voted answers an approval recorded as a vote that did not complete
	// the count: the turn still waits (see votes.go).
	voted(w http.ResponseWriter, r *http.Request, v *runtime.Voted)
	// run carries a claimed continuation out in the request and answers.
	run(w http.ResponseWriter, r *http.Request, c *runtime.Continuation)
	// follow answers a request that would have streamed the continuation
	// of a turn someone else won: it streams theirs (see follow.go). It
	// reports false, having written nothing, for a request it would not
	// stream, which is then refused as usual.
	follow(w http.ResponseWriter, r *http.Request, f *follower) bool
}

// A formSurface shows a refused input form again, with the user's values
// and a message per field (422). On a surface that is not one, a page's
// invalid_input is the table's error page.
type formSurface interface {
	surface
	invalid(w http.ResponseWriter, r *http.Request, id int64, ref *runtime.Refusal)
}

// Each surface as what it is: a method whose signature drifts fails to
// compile here instead of dropping out of refuse's type assertion.
var (
	_ decider     = inboxSurface{}
	_ formSurface = inboxSurface{}
	_ decider     = playgroundSurface{}
	_ formSurface = playgroundSurface{}
	_ decider     = apiSurface{}
	_ surface     = pageSurface{}
)

// ask is a decision put to the engine on a path the flow chose; it returns
// the continuation to run in the request, or nil when a worker carries the
// decision out.
type ask func(ctx context.Context, path string) (*runtime.Continuation, error)

// decide carries one decision about run id through the flow.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, sf decider, id int64, decide ask) {
	path, release, err := s.admission.choose(r.Context(), sf.want(r))
	if err != nil {
		s.refuse(w, r, sf, id, err)
		return
	}
	defer release()
	c, err := decide(r.Context(), path)
	var v *runtime.Voted
	switch {
	case errors.As(err, &v):
		sf.voted(w, r, v)
	case err != nil && s.followed(w, r, sf, id, err, release):
	case err != nil:
		s.refuse(w, r, sf, id, err)
	case c == nil:
		sf.recorded(w, r, id)
	default:
		sf.run(w, r, c)
	}
}

// approval asks the engine to approve or deny a pending turn.
func (s *Server) approval(req runtime.DecideRequest) ask {
	return func(ctx context.Context, path string) (*runtime.Continuation, error) {
		req.Path = path
		return s.engine.Decide(ctx, req)
	}
}

// approvalForm reads an approval or denial posted as a form: the hidden
// turn_digest, decision, scope and reason, and the form itself, whose edit
// fields (see edit.go) the pipeline reads against the turn it decides.
func approvalForm(r *http.Request, id int64) runtime.DecideRequest {
	f := r.PostForm
	req := runtime.DecideRequest{RunID: id, Digest: f.Get("turn_digest"), Decision: f.Get("decision"),
		Scope: f.Get("scope"), Reason: f.Get("reason"), Actor: actorOf(r), Form: f}
	// A card's per-call choices (see decide_calls.go); the calls left
	// open take the button's decision.
	req.Calls, req.Rest, req.Decision = callsForm(f, req.Decision)
	return req
}

// inputForm reads an answer to an input turn posted as a form: the hidden
// turn_digest, and the fields, which the pipeline reads by the schema of
// the turn it answers.
func inputForm(r *http.Request, id int64) runtime.InputRequest {
	return runtime.InputRequest{RunID: id, Digest: r.PostForm.Get("turn_digest"), Form: r.PostForm,
		Actor: currentUser(r).Actor()}
}

// answering asks the engine to take an answer to an input turn.
func (s *Server) answering(req runtime.InputRequest) ask {
	return func(ctx context.Context, path string) (*runtime.Continuation, error) {
		req.Path = path
		return s.engine.SubmitInput(ctx, req)
	}
}

// runToEnd runs a continuation inside the request until it pauses or
// settles, for an answer that comes only then: that may take longer than
// the server's write timeout, which no longer applies.
func runToEnd(w http.ResponseWriter, r *http.Request, c *runtime.Continuation, obs runtime.Observer) runtime.Outcome {
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	return c.Run(r.Context(), obs)
}

// lines are what a streamed continuation sends: first (a line of kind
// stepType, or nil) right away, step's line of kind stepType for every
// recorded step, keep's line whenever the stream was silent for
// --keepalive, and last's line, after the last keepalive.
type lines struct {
	first    any
	stepType string
	step     func(runtime.Step) any
	// toolStart, when set, is the line of kind stepType sent when a tool
	// call starts; nil from it sends none.
	toolStart func(name string) any
	// text says the viewer may read the run: the model's text and
	// thinking go to it as they stream.
	text bool
	keep func() any
	last func(runtime.Outcome) (typ string, line any)
}

// lineObserver sends a stream's lines as the continuation records steps
// and starts tool calls.
type lineObserver struct {
	st *stream
	l  lines
}

func (o lineObserver) OnStep(rs runtime.Step) {
	o.st.setTurn(rs.Turn)
	o.st.send(o.l.stepType, o.l.step(rs))
}

// OnDelta sends a piece of the model's text to a viewer who may read the
// run; a decider who may not gets nothing.
func (o lineObserver) OnDelta(d runtime.Delta) {
	if !o.l.text {
		return
	}
	o.st.setTurn(d.Turn)
	o.st.send(toTextLine(d))
}

func (o lineObserver) OnToolStart(name string) {
	if o.l.toolStart == nil {
		return
	}
	if line := o.l.toolStart(name); line != nil {
		o.st.send(o.l.stepType, line)
	}
}

// runner is what a stream's lines come from: a claimed continuation, whose
// Run goes on to its end if the client leaves, or a follower of someone
// else's (see follow.go), which stops with its client.
type runner interface {
	Run(ctx context.Context, obs runtime.Observer) runtime.Outcome
	// Turn is the conversation's turn whose lines the stream sends.
	Turn() int
}

// streamRun runs a continuation inside the request as an NDJSON stream of
// these lines. The run goes on to its end if the client leaves
// (Continuation.Run sees to that). A follower's own first line (it says
// whose decision it follows) goes before the surface's.
func (s *Server) streamRun(w http.ResponseWriter, r *http.Request, c runner, l lines) {
	st := s.startStream(w)
	st.setTurn(c.Turn())
	if f, ok := c.(*follower); ok {
		st.send(lineFollowing, f.firstLine())
	}
	if l.first != nil {
		st.send(l.stepType, l.first)
	}
	stop := st.keepalives(s.keepalive, l.keep)
	defer stop() // also when the continuation panics: no keepalive may follow the handler
	out := c.Run(r.Context(), lineObserver{st: st, l: l})
	// The last line may wait for the database (the inbox saves its flash
	// first), which in a burst of settling continuations waits for the
	// pool for seconds: the keepalives go on until the line is ready.
	typ, line := l.last(out)
	stop()
	st.send(typ, line)
}

// streamSteps runs a continuation as the playground and API stream it:
// step lines, keepalives, one outcome line. full says whether the viewer
// may read the run: a decider who holds only the approve grant gets the
// steps' kinds and timing and the outcome without the answer.
func (s *Server) streamSteps(w http.ResponseWriter, r *http.Request, c runner, full bool) {
	s.streamRun(w, r, c, lines{stepType: lineStep, text: full,
		step: func(st runtime.Step) any { return stepLine{Type: lineStep, Seq: st.Seq, Step: toStepJSON(st, full)} },
		keep: func() any { return typeLine{Type: lineKeepalive} },
		last: func(out runtime.Outcome) (string, any) { return lineTerminal, outcomeLine(out, full) }})
}

// collectSteps runs a continuation to its end and returns its steps and
// outcome, for the one-document answer of the playground and the API.
func collectSteps(w http.ResponseWriter, r *http.Request, c *runtime.Continuation, full bool) ([]stepJSON, runtime.Outcome) {
	var mu sync.Mutex
	steps := []stepJSON{}
	out := runToEnd(w, r, c, runtime.ObserverFunc(func(st runtime.Step) {
		mu.Lock()
		steps = append(steps, toStepJSON(st, full))
		mu.Unlock()
	}))
	return steps, out
}

// streamProgress runs a continuation as the inbox streams it: counts
// only, "settled" last (see inbox.go). To a viewer who may read the run
// (full) the lines also say which tool is running and for how long; a
// decider who holds the approve grant alone gets the counts only.
func (s *Server) streamProgress(w http.ResponseWriter, r *http.Request, c runner, full bool, last func(runtime.Outcome)) {
	var (
		mu    sync.Mutex // the keepalive timer reads what the continuation writes
		steps int64
		tool  string
		since time.Time
	)
	line := func(typ string, next func()) any {
		mu.Lock()
		defer mu.Unlock()
		if next != nil {
			next()
		}
		l := progressLine{Type: typ, Steps: steps}
		if full && tool != "" {
			l.Tool, l.ToolMS = tool, time.Since(since).Milliseconds()
		}
		return l
	}
	s.streamRun(w, r, c, lines{first: progressLine{Type: lineProgress, Steps: 0}, stepType: lineProgress,
		step: func(runtime.Step) any { return line(lineProgress, func() { steps, tool = steps+1, "" }) },
		toolStart: func(name string) any {
			if !full {
				return nil
			}
			return line(lineProgress, func() { tool, since = name, time.Now() })
		},
		keep: func() any { return line(lineKeepalive, nil) },
		last: func(out runtime.Outcome) (string, any) {
			last(out)
			return lineSettled, typeLine{Type: lineSettled}
		}})
}
