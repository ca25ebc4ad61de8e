package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/web"
)

// waitFor bounds how long a test waits for a continuation to end.
const waitFor = 10 * time.Second

// votesConfig needs two approvals of every turn.
const votesConfig = `
identifier: votes
name: Votes
approvals_required: 2
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - text: "done"
tools: [refund_order]
`

// newVotesApp is an app with the votes configuration and a third person
// who may decide: approver2, beside approver and admin.
func newVotesApp(t *testing.T) *testApp {
	t.Helper()
	a := newAppWith(t, 0, appEngine{configs: []string{votesConfig}})
	hash, err := web.HashPassword(testPassword)
	if err != nil {
		t.Fatal(err)
	}
	u := runtime.User{Name: "approver2", Role: runtime.RoleUser, Grants: []string{runtime.GrantApprove}, PasswordHash: hash}
	if err := a.Store.CreateUser(context.Background(), &u); err != nil {
		t.Fatal(err)
	}
	a.Users[u.Name] = &u
	return a
}

// 2 of 3 through the inbox, without JavaScript: the first approval is a
// vote (a flash with the count, the card says who voted), a second one by
// the same person is refused with nothing written, the second person's
// claims the turn and the run goes on.
func TestVotesInbox(t *testing.T) {
	a := newVotesApp(t)
	paused, order := a.Waiting(t, "votes")
	alice, bob := a.signIn(t, "approver"), a.signIn(t, "approver2")

	res, _ := alice.post(inboxPath(paused.RunID, "decision"), approve(paused.Digest))
	wantRedirect(t, res, "/inbox")
	_, page := alice.get("/inbox")
	if want := "Your approval of run"; !strings.Contains(page, want) || !strings.Contains(page, "is recorded: 1 of 2 approvals") {
		t.Errorf("the flash after a vote does not count it:\n%s", page)
	}
	card := inboxCard(t, page, paused.RunID)
	if !strings.Contains(card, `data-testid="votes"`) || !strings.Contains(card, "1 of 2 approvals: approver") {
		t.Errorf("the card does not show the vote:\n%s", card)
	}
	_, runPage := a.signIn(t, "admin").get(runPath(paused.RunID, ""))
	if !strings.Contains(runPage, `data-testid="run-votes"`) || !strings.Contains(runPage, "1 of 2 approvals: approver") {
		t.Errorf("the run page does not show the vote")
	}

	before := a.State(t, paused.RunID)
	res, _ = alice.post(inboxPath(paused.RunID, "decision"), approve(paused.Digest))
	wantRedirect(t, res, "/inbox")
	if got := alice.flashText(); !strings.Contains(got, "You already approved run") {
		t.Errorf("a second vote's flash = %q", got)
	}
	a.Unchanged(t, paused.RunID, before)

	res, _ = bob.post(inboxPath(paused.RunID, "decision"), approve(paused.Digest))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the second vote answered %d", res.StatusCode)
	}
	a.WaitStatus(t, paused.RunID, runtime.StatusCompleted, waitFor)
	if got := a.Refunds(t, order); got != 1 {
		t.Errorf("%d refunds after 2 of 2 approvals, want 1", got)
	}
	if ds := a.Decisions(t, paused.RunID); len(ds) != 1 {
		t.Errorf("decisions %+v, want one", ds)
	}
}

// 2 of 3 through the API: the first vote is 200 with the count, the run
// JSON shows it, a second vote of the same person is 409 already_voted,
// the second person's approval answers as any approval does.
func TestVotesAPI(t *testing.T) {
	a := newVotesApp(t)
	paused, _ := a.Waiting(t, "votes")
	alice, bob := a.bearer(t, "approver", "run:decide"), a.bearer(t, "approver2", "run:decide")
	path := runPathAPI(paused.RunID, "/decisions")
	feed := openFeed(t, a, a.bearer(t, "admin", runtime.ScopeRunRead), "")

	got := alice.call(t, a, http.MethodPost, path, approveBody(t, paused.Digest), nil)
	v := got.wantKeys(t, http.StatusOK, "run_id", "status", "approvals_required", "votes")
	// The feed tells of the vote, so that open inboxes count it.
	if l := change(t, feed, paused.RunID, "voted"); l.Value["decided_by"] != "approver" || l.Value["decision"] != "approve" ||
		l.Value["status"] != "waiting_for_approval" {
		t.Errorf("the feed's voted line %s, want approve by approver, still waiting", l)
	}
	if v["status"] != "voted" || v["approvals_required"] != float64(2) {
		t.Errorf("the vote's answer %v", v)
	}
	if votes, _ := v["votes"].([]any); len(votes) != 1 || votes[0].(map[string]any)["user"] != "approver" {
		t.Errorf("the vote's answer lists votes %v", v["votes"])
	}
	run, _ := a.bearer(t, "admin", "run:read").call(t, a, http.MethodGet, runPathAPI(paused.RunID, ""), "", nil).object(t)["run"].(map[string]any)
	if run["approvals_required"] != float64(2) {
		t.Errorf("the run JSON has approvals_required %v", run["approvals_required"])
	}
	if votes, _ := run["votes"].([]any); len(votes) != 1 || votes[0].(map[string]any)["user"] != "approver" || votes[0].(map[string]any)["at"] == nil {
		t.Errorf("the run JSON has votes %v", run["votes"])
	}

	before := a.State(t, paused.RunID)
	alice.call(t, a, http.MethodPost, path, approveBody(t, paused.Digest), nil).wantError(t, http.StatusConflict, "already_voted")
	a.Unchanged(t, paused.RunID, before)

	got = bob.call(t, a, http.MethodPost, path, approveBody(t, paused.Digest), nil)
	if got.status != http.StatusOK && got.status != http.StatusAccepted {
		t.Fatalf("the second vote: %d %s", got.status, got.body)
	}
	if b := string(got.body); !strings.Contains(b, `"outcome"`) && !strings.Contains(b, `"path"`) {
		t.Errorf("the second vote is not answered as an approval: %s", got.body)
	}
	a.WaitStatus(t, paused.RunID, runtime.StatusCompleted, waitFor)
	if l := change(t, feed, paused.RunID, "decided"); l.Value["decided_by"] != "approver2" {
		t.Errorf("the feed's decided line %s, want the second voter's decision", l)
	}
}

// A deny by anyone who may decide ends a voted turn at once.
func TestVotesDenyThroughTheAPI(t *testing.T) {
	a := newVotesApp(t)
	paused, order := a.Waiting(t, "votes")
	path := runPathAPI(paused.RunID, "/decisions")
	a.bearer(t, "approver", "run:decide").call(t, a, http.MethodPost, path, approveBody(t, paused.Digest), nil).
		wantKeys(t, http.StatusOK, "votes")
	deny := jsonBody(t, map[string]string{"turn_digest": paused.Digest, "decision": "deny", "reason": "no"})
	got := a.bearer(t, "approver2", "run:decide").call(t, a, http.MethodPost, path, deny, nil)
	if got.status != http.StatusOK && got.status != http.StatusAccepted {
		t.Fatalf("the denial: %d %s", got.status, got.body)
	}
	r := a.WaitRun(t, paused.RunID, waitFor, "past the denied turn", func(r *runtime.Run) bool {
		return r.Status != runtime.StatusWaitingForApproval && r.Status != runtime.StatusDecided && r.Status != runtime.StatusRunning
	})
	if r.Status != runtime.StatusCompleted {
		t.Errorf("after the denial the run is %s", r.Status)
	}
	if got := a.Refunds(t, order); got != 0 {
		t.Errorf("%d refunds after a denial", got)
	}
}

// A bulk counts as a vote for each run that needs votes: two bulks by two
// people claim both runs; the first answers "voted" for each.
func TestVotesBulk(t *testing.T) {
	a := newVotesApp(t)
	x, _ := a.Waiting(t, "votes")
	y, _ := a.Waiting(t, "votes")
	body := jsonBody(t, map[string]any{"decisions": []map[string]any{
		{"run_id": x.RunID, "turn_digest": x.Digest, "decision": "approve"},
		{"run_id": y.RunID, "turn_digest": y.Digest, "decision": "approve"}}})
	got := a.bearer(t, "approver", "run:decide").call(t, a, http.MethodPost, "/api/decisions", body, nil)
	results, _ := got.object(t)["results"].([]any)
	if got.status != http.StatusOK || len(results) != 2 {
		t.Fatalf("the first bulk: %d %s", got.status, got.body)
	}
	for _, r := range results {
		m := r.(map[string]any)
		if m["status"] != "voted" || m["approvals_required"] != float64(2) {
			t.Errorf("first bulk result %v, want voted of 2", m)
		}
	}
	// The second person's bulk, through the inbox form.
	form := url.Values{"decision": {"approve"}, "scope": {"once"}}
	form.Add("run", bulkField(x, x.Digest))
	form.Add("run", bulkField(y, y.Digest))
	res, _ := a.signIn(t, "approver2").post("/inbox/decisions", form)
	wantRedirect(t, res, "/inbox")
	for _, p := range []runtime.Outcome{x, y} {
		a.WaitStatus(t, p.RunID, runtime.StatusCompleted, waitFor)
		if got := a.Count(t, "SELECT COUNT(*) FROM votes WHERE run_id = ?", p.RunID); got != 2 {
			t.Errorf("run %d has %d votes, want 2", p.RunID, got)
		}
	}
}
