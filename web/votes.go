package web

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
)

// How the surfaces answer a vote that did not complete the count (see
// runtime/votes.go): nothing was claimed, so no continuation runs and the
// answer comes at once. A page goes back where it came from with a flash
// that counts the approvals; the API answers 200 with the run's count.
// The N-th vote is the decision and answers as any approval does.

// votedJSON is the API's answer to a vote, and a bulk's result of one.
type votedJSON struct {
	RunID             int64         `json:"run_id"`
	Status            string        `json:"status"` // "voted"
	ApprovalsRequired int           `json:"approvals_required"`
	Votes             runtime.Votes `json:"votes"`
}

func toVotedJSON(v *runtime.Voted) votedJSON {
	return votedJSON{RunID: v.RunID, Status: "voted", ApprovalsRequired: v.Required, Votes: v.Votes}
}

// votedFlash: "Your approval is recorded: 1 of 2 approvals."
func votedFlash(v *runtime.Voted) string {
	return strings.TrimSpace(votesFlash([]votedJSON{toVotedJSON(v)}))
}

// approvalsCount: "1 of 2 approvals".
func approvalsCount(votes, required int) string {
	return fmt.Sprintf("%d of %d approvals", votes, required)
}

// voters names who voted, in order: "alice, bob".
func voters(vs runtime.Votes) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.User
	}
	return strings.Join(names, ", ")
}

// votedPage sends a page's voter back where the surface sends its
// refusals, with the count.
func (s *Server) votedPage(w http.ResponseWriter, r *http.Request, sf surface, v *runtime.Voted) {
	s.flash(r.Context(), votedFlash(v))
	http.Redirect(w, r, sf.back(v.RunID), http.StatusSeeOther)
}

func (sf inboxSurface) voted(w http.ResponseWriter, r *http.Request, v *runtime.Voted) {
	sf.s.votedPage(w, r, sf, v)
}

func (sf playgroundSurface) voted(w http.ResponseWriter, r *http.Request, v *runtime.Voted) {
	sf.s.votedPage(w, r, sf, v)
}

func (sf apiSurface) voted(w http.ResponseWriter, r *http.Request, v *runtime.Voted) {
	sf.s.writeJSON(w, http.StatusOK, toVotedJSON(v))
}

// votesFlash adds a bulk's votes to its flash: " Your approval of run 7
// is recorded: 1 of 2 approvals." for each, "" for none.
func votesFlash(voted []votedJSON) string {
	var b strings.Builder
	for _, v := range voted {
		fmt.Fprintf(&b, " Your approval of run %d is recorded: %s.", v.RunID, approvalsCount(len(v.Votes), v.ApprovalsRequired))
	}
	return b.String()
}

// turnVotes is what the JSON of a waiting run says of its votes: for a
// turn that needs more than one approval, how many, and the votes so far
// (an empty list before the first); nothing otherwise.
func turnVotes(required int, votes runtime.Votes) (int, *runtime.Votes) {
	if required < 2 {
		return 0, nil
	}
	vs := append(runtime.Votes{}, votes...)
	return required, &vs
}

// votesLine is what a card says of its votes: "1 of 2 approvals: alice";
// "" for a turn that needs one approval.
func votesLine(required int, votes runtime.Votes) string {
	if required < 2 {
		return ""
	}
	line := approvalsCount(len(votes), required)
	if len(votes) > 0 {
		line += ": " + voters(votes)
	}
	return line
}
