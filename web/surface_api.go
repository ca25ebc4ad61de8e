package web

import (
	"net/http"

	"github.com/turnstile-dev/turnstile/runtime"
)

// apiSurface answers the API's decisions: in the request whenever a slot
// is free, for the API wants the outcome; with every slot taken on the
// durable path when a worker lives, answered 202 with the run decided.
// The steps carry their content for the run's owner and admins, and none
// for a decider who holds the approve grant only, who may decide the run
// but not read it (as in the inbox). Every refusal is a JSON error, so no
// page is ever sent back anywhere.
type apiSurface struct{ s *Server }

func (apiSurface) name() string            { return "api" }
func (apiSurface) html(*http.Request) bool { return false }
func (apiSurface) back(int64) string       { return "" }
func (apiSurface) ownWords() bool          { return false }
func (apiSurface) want(*http.Request) want { return wantStream }

func (sf apiSurface) recorded(w http.ResponseWriter, r *http.Request, id int64) {
	// The decider may hold only the approve grant, so the answer tells no
	// more of the run than the decision itself.
	sf.s.writeJSON(w, http.StatusAccepted, map[string]any{"path": runtime.PathDurable,
		"run": map[string]any{"id": id, "status": runtime.StatusDecided}})
}

func (sf apiSurface) run(w http.ResponseWriter, r *http.Request, c *runtime.Continuation) {
	full := actorOf(r).MayRead(c.OwnerID())
	if wantsStream(r) {
		sf.s.streamSteps(w, r, c, full)
		return
	}
	steps, out := collectSteps(w, r, c, full)
	sf.s.writeJSON(w, http.StatusOK, map[string]any{"steps": steps, "outcome": outcomeLine(out, full)})
}

// follow streams the winner's steps to a streamed request; a request for
// one JSON document is refused as already_resuming, with the winning
// decision.
func (sf apiSurface) follow(w http.ResponseWriter, r *http.Request, f *follower) bool {
	if !wantsStream(r) {
		return false
	}
	sf.s.streamSteps(w, r, f, f.sum.MayRead)
	return true
}
