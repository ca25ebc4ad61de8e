package web

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/turnstile-dev/turnstile/runtime"
)

// What a bulk decision asks, read from the inbox's form or the API's body
// and checked as a whole before any run is read: see bulk.go.

func invalidBulk(format string, args ...any) error {
	return &runtime.Refusal{Code: codeInvalidBulk, Message: fmt.Sprintf(format, args...)}
}

// bulkShape checks what a bulk asks of every run alike.
func bulkShape(n int, decision, scope, reason string) error {
	switch {
	case n == 0:
		return invalidBulk("select at least one run")
	case n > runtime.MaxBulk:
		return invalidBulk("a bulk decides at most %d runs at once; this one names %d", runtime.MaxBulk, n)
	case decision != runtime.DecisionApprove && decision != runtime.DecisionDeny:
		return invalidBulk("decision must be approve or deny")
	case scope != "" && scope != runtime.ScopeOnce && scope != runtime.ScopeSession:
		return invalidBulk("scope must be once or session")
	case utf8.RuneCountInString(reason) > 2000:
		return invalidBulk("the reason must be at most 2000 characters")
	}
	return nil
}

// bulkFormRequests reads POST /inbox/decisions: run fields of the form
// <run_id>:<turn_digest>, decision, scope, reason.
func bulkFormRequests(r *http.Request) ([]runtime.DecideRequest, error) {
	f := r.PostForm
	runs := f["run"]
	if err := bulkShape(len(runs), f.Get("decision"), f.Get("scope"), f.Get("reason")); err != nil {
		return nil, err
	}
	actor := actorOf(r)
	seen := make(map[int64]bool, len(runs))
	reqs := make([]runtime.DecideRequest, len(runs))
	for i, v := range runs {
		idText, digest, _ := strings.Cut(v, ":")
		id, err := strconv.ParseInt(idText, 10, 64)
		if err != nil || id <= 0 || strconv.FormatInt(id, 10) != idText || !digestForm.MatchString(digest) {
			return nil, invalidBulk("run %q is not <run id>:<turn digest of 64 lowercase hex digits>", v)
		}
		if seen[id] {
			return nil, invalidBulk("run %d is selected twice", id)
		}
		seen[id] = true
		reqs[i] = runtime.DecideRequest{RunID: id, Digest: digest, Decision: f.Get("decision"), Scope: f.Get("scope"),
			Reason: f.Get("reason"), Actor: actor, Inbox: true}
	}
	return reqs, nil
}

// bulkBody is the body of POST /api/decisions.
type bulkBody struct {
	Decisions []bulkEntryJSON `json:"decisions"`
}

// bodyLimits stop reading a bulk at its entry MaxBulk+1: what follows is
// never read, however much of the body it is.
func (bulkBody) bodyLimits() bodyLimits {
	l := defaultLimits
	l.entries = runtime.MaxBulk
	l.tooMany = func(path string, limit int) error {
		return invalidBulk("a bulk decides at most %d runs at once; this one has an entry %d (%s[%d]) and was read no further",
			limit, limit+1, path, limit)
	}
	return l
}

type bulkEntryJSON struct {
	RunID      int64  `json:"run_id"`
	TurnDigest string `json:"turn_digest"`
	Decision   string `json:"decision"`
	Scope      string `json:"scope"`
	Reason     string `json:"reason"`
}

// apiBulkRequests checks a decoded POST /api/decisions body.
func apiBulkRequests(body bulkBody, actor runtime.Actor) ([]runtime.DecideRequest, error) {
	n := len(body.Decisions)
	if n == 0 {
		return nil, invalidBulk(`decisions is required: a list of {"run_id", "turn_digest", "decision"} (at most %d)`, runtime.MaxBulk)
	}
	first := body.Decisions[0]
	if err := bulkShape(n, first.Decision, first.Scope, first.Reason); err != nil {
		return nil, err
	}
	seen := make(map[int64]bool, n)
	reqs := make([]runtime.DecideRequest, n)
	for i, d := range body.Decisions {
		switch {
		case d.RunID <= 0:
			return nil, invalidBulk("decisions[%d].run_id must be a positive run id", i)
		case !digestForm.MatchString(d.TurnDigest):
			return nil, invalidBulk("decisions[%d].turn_digest must be 64 lowercase hex digits, as GET /api/approvals gives it", i)
		case d.Decision != first.Decision:
			return nil, invalidBulk("a bulk either approves or denies all its runs: decisions[%d] is %q, decisions[0] %q", i, d.Decision, first.Decision)
		case seen[d.RunID]:
			return nil, invalidBulk("run %d is named twice (decisions[%d])", d.RunID, i)
		}
		if err := bulkShape(n, d.Decision, d.Scope, d.Reason); err != nil {
			return nil, invalidBulk("decisions[%d]: %s", i, err.(*runtime.Refusal).Message)
		}
		seen[d.RunID] = true
		reqs[i] = runtime.DecideRequest{RunID: d.RunID, Digest: d.TurnDigest, Decision: d.Decision, Scope: d.Scope,
			Reason: d.Reason, Actor: actor}
	}
	return reqs, nil
}
