package web_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

const (
	deadlineYAML = `
identifier: deadline
name: Deadline
decision_timeout: 3h
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - text: "done"
tools: [refund_order]
`
	escalateYAML = `
identifier: escalate
name: Escalate
decision_timeout: 1s
on_timeout: escalate
escalate_grant: refunds
provider:
  type: scripted
  script:
    rounds:
      - tool_calls: [{name: refund_order, arguments: {order_id: "${order_id}"}}]
      - text: "done"
tools: [refund_order]
`
)

// TestDecisionDeadlineIsShown: the run JSON and GET /api/approvals carry
// decision_deadline (null without one), and the inbox card says when the
// turn expires; a run without a deadline shows none.
func TestDecisionDeadlineIsShown(t *testing.T) {
	a := newApp(t, 0)
	a.Configure(t, deadlineYAML)
	timed := a.start(t, "deadline", "owner", runtime.OriginInteractive)
	plain := a.start(t, "refund", "owner", runtime.OriginInteractive)
	row := a.Run(t, timed.RunID)
	if row.DecisionDeadline == nil {
		t.Fatal("the run has no deadline")
	}
	want := row.DecisionDeadline.UTC().Format("2006-01-02T15:04:05.000000Z")

	owner := a.bearer(t, "owner", "run:read")
	got := owner.call(t, a, http.MethodGet, runPathAPI(timed.RunID, ""), "", nil).wantKeys(t, http.StatusOK, "run")
	if run := got["run"].(map[string]any); run["decision_deadline"] != want {
		t.Errorf("run decision_deadline = %v, want %s", run["decision_deadline"], want)
	}
	got = owner.call(t, a, http.MethodGet, runPathAPI(plain.RunID, ""), "", nil).wantKeys(t, http.StatusOK, "run")
	if run := got["run"].(map[string]any); run["decision_deadline"] != nil {
		t.Errorf("run without a timeout has decision_deadline %v, want null", run["decision_deadline"])
	} else if _, ok := run["decision_deadline"]; !ok {
		t.Error("run JSON leaves decision_deadline out, want null")
	}
	list := owner.call(t, a, http.MethodGet, "/api/approvals", "", nil).wantKeys(t, http.StatusOK, "approvals")["approvals"].([]any)
	deadlines := map[float64]any{}
	for _, item := range list {
		m := item.(map[string]any)
		deadlines[m["run_id"].(float64)] = m["decision_deadline"]
	}
	if deadlines[float64(timed.RunID)] != want || deadlines[float64(plain.RunID)] != nil {
		t.Errorf("approvals' deadlines = %v, want %s for run %d and null for run %d", deadlines, want, timed.RunID, plain.RunID)
	}

	c := a.signIn(t, "approver")
	for _, path := range []string{"/inbox", fmt.Sprintf("/inbox/runs/%d", timed.RunID)} {
		res, body := c.get(path)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d", path, res.StatusCode)
		}
		if card := inboxCard(t, body, timed.RunID); !strings.Contains(card, `data-testid="expires">expires in 3 h</time>`) {
			t.Errorf("GET %s: the card does not say it expires in 3 h:\n%s", path, card)
		}
	}
	_, body := c.get("/inbox")
	if card := inboxCard(t, body, plain.RunID); strings.Contains(card, `data-testid="expires"`) {
		t.Errorf("a run without a deadline shows one:\n%s", card)
	}
}

// TestEscalatedCard: once escalated, the card says who may decide; a
// user without the grant still sees the run (it waits, and they may read
// what the inbox shows of it) but gets no forms, and a post of the old
// form is refused as such, nothing written.
func TestEscalatedCard(t *testing.T) {
	a := newApp(t, 0)
	a.Configure(t, escalateYAML)
	paused := a.start(t, "escalate", "owner", runtime.OriginInteractive)
	// The server's own engine works, so its /metrics count the expiry.
	stop := testrig.Work(t, a.Engine, 1, 20*time.Millisecond)
	escalated := a.WaitRun(t, paused.RunID, 10*time.Second, "escalated", func(r *runtime.Run) bool {
		return r.Status == runtime.StatusWaitingForApproval && r.TurnDigest != paused.Digest
	})
	stop()
	s := a.scrapeMetrics(t)
	if esc, deny := s.value(t, "turnstile_decision_expiries_total", "action=escalate"),
		s.value(t, "turnstile_decision_expiries_total", "action=deny"); esc != 1 || deny != 0 {
		t.Errorf("expiries counted: escalate %v, deny %v; want 1 and 0", esc, deny)
	}

	note := `data-testid="escalated">Escalated: only holders of the refunds grant may decide</p>`
	approver := a.signIn(t, "approver")
	_, body := approver.get("/inbox")
	card := inboxCard(t, body, paused.RunID)
	if !strings.Contains(card, note) || strings.Contains(card, "<form") {
		t.Errorf("approver's card: want the escalation note and no form:\n%s", card)
	}
	_, body = a.signIn(t, "admin").get("/inbox")
	card = inboxCard(t, body, paused.RunID)
	if !strings.Contains(card, note) || !strings.Contains(card, `value="`+escalated.TurnDigest+`"`) || !strings.Contains(card, `value="approve"`) {
		t.Errorf("admin's card: want the note and the forms of the new turn:\n%s", card)
	}

	before := a.State(t, paused.RunID)
	res, _ := approver.post(inboxPath(paused.RunID, "decision"), approve(escalated.TurnDigest))
	wantRedirect(t, res, "/inbox")
	if got := approver.flashText(); !strings.Contains(got, `only holders of the "refunds" grant may decide it now`) {
		t.Errorf("flash = %q, want it to name the grant", got)
	}
	a.Unchanged(t, paused.RunID, before)

	got := a.bearer(t, "admin", "run:read").call(t, a, http.MethodGet, "/api/approvals", "", nil).
		wantKeys(t, http.StatusOK, "approvals")["approvals"].([]any)
	if len(got) != 1 || got[0].(map[string]any)["escalated_to"] != "refunds" {
		t.Errorf("approvals = %v, want the run escalated_to refunds", got)
	}
}
