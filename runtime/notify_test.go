package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// publicURL is the tests' --public-url.
const publicURL = "https://turnstile.example"

// notifyYAML is refundYAML under another identifier at a privacy level,
// with extra keys.
func notifyYAML(identifier string, privacy runtime.PrivacyLevel, extra string) string {
	y := strings.Replace(refundYAML, "identifier: refund\n", "identifier: "+identifier+"\n", 1)
	return y + fmt.Sprintf("privacy_level: %s\n%s", privacy, extra)
}

// testEndpoints tell a standard endpoint everything and a Slack one only
// that the run waits.
var testEndpoints = []runtime.Notify{
	{URL: "http://receiver.test/standard", SecretEnv: "TEST_WEBHOOK_SECRET"},
	{URL: "http://receiver.test/slack", Format: runtime.NotifySlack, Events: []string{runtime.EventRunWaiting}},
}

// bodyOf decodes a standard body.
type standardBody struct {
	Type      string         `json:"type"`
	Timestamp string         `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

func decodeBody(t testing.TB, b []byte) standardBody {
	t.Helper()
	var sb standardBody
	if err := json.Unmarshal(b, &sb); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	if _, err := time.Parse(time.RFC3339, sb.Timestamp); err != nil {
		t.Errorf("timestamp %q is not RFC 3339: %v", sb.Timestamp, err)
	}
	return sb
}

// notifyWorld is a world whose configurations, all but refundYAML's,
// notify testEndpoints.
func notifyWorld(t testing.TB, yamls ...string) *testrig.World {
	t.Helper()
	w := testrig.New(t, testrig.Configs(yamls...), testrig.Engine(runtime.Options{PublicURL: publicURL + "/"}),
		testrig.User("refunder", runtime.RoleUser, "approve", "refunds"))
	cfgs, err := w.Store.Configurations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfgs {
		if c.Identifier != "refund" {
			w.SetNotify(t, c.Identifier, testEndpoints)
		}
	}
	return w
}

func TestNotificationsAreWrittenInTheStepsCommit(t *testing.T) {
	w := notifyWorld(t, notifyYAML("told", runtime.PrivacyMetadata, ""), refundYAML)
	paused, _ := w.Waiting(t, "told")
	rows := w.Outbox(t, paused.RunID)
	if len(rows) != 2 || rows[0].Event != runtime.EventRunWaiting || rows[1].Event != runtime.EventRunWaiting ||
		rows[0].Format != runtime.NotifyStandard || rows[1].Format != runtime.NotifySlack {
		t.Fatalf("outbox after the pause = %+v, want run.waiting for the standard and the slack endpoint", rows)
	}
	decide := fmt.Sprintf("%s/inbox/runs/%d", publicURL, paused.RunID)
	b := decodeBody(t, rows[0].Body)
	if b.Type != runtime.EventRunWaiting || b.Data["run_id"] != float64(paused.RunID) || b.Data["configuration"] != "told" ||
		b.Data["status"] != string(runtime.StatusWaitingForApproval) || b.Data["turn_digest"] != paused.Digest ||
		fmt.Sprint(b.Data["tool_names"]) != "[refund_order]" || b.Data["decide_url"] != decide {
		t.Errorf("run.waiting body = %+v, want the run's ids, status, digest, tool names and decide_url %s", b, decide)
	}
	if v, ok := b.Data["decision_deadline"]; !ok || v != nil {
		t.Errorf("decision_deadline = %v (present %v), want null for a turn without a deadline", v, ok)
	}
	for _, r := range rows {
		if strings.Contains(string(r.Body), "MARKER-ARGUMENT") {
			t.Errorf("%s body at privacy metadata carries the arguments: %s", r.Format, r.Body)
		}
		if r.Status != "pending" || r.Attempts != 0 || !strings.HasPrefix(r.WebhookID, "msg_") {
			t.Errorf("new notification = %+v, want pending, no attempt, a msg_ id", r)
		}
	}
	var slack map[string]string
	if err := json.Unmarshal(rows[1].Body, &slack); err != nil || !strings.Contains(slack["text"], "<"+decide+"|") ||
		!strings.Contains(slack["text"], "refund_order") || len(slack) != 1 {
		t.Errorf("slack body = %s (%v), want only a text naming the tool and linking %s", rows[1].Body, err, decide)
	}

	w.Approve(t, paused)
	rows = w.Outbox(t, paused.RunID)
	if len(rows) != 3 || rows[2].Event != runtime.EventRunSettled || rows[2].Format != runtime.NotifyStandard {
		t.Fatalf("outbox after the settle = %+v, want a third row, run.settled to the standard endpoint only", rows)
	}
	b = decodeBody(t, rows[2].Body)
	if b.Data["status"] != string(runtime.StatusCompleted) || b.Data["termination_reason"] != runtime.ReasonCompleted {
		t.Errorf("run.settled data = %v, want completed, termination_reason completed", b.Data)
	}
	if _, ok := b.Data["answer"]; ok || strings.Contains(string(rows[2].Body), "MARKER-ANSWER") {
		t.Errorf("run.settled at privacy metadata carries the answer: %s", rows[2].Body)
	}
	if rows[0].WebhookID == rows[1].WebhookID || rows[1].WebhookID == rows[2].WebhookID {
		t.Errorf("webhook ids %s %s %s, want one per notification", rows[0].WebhookID, rows[1].WebhookID, rows[2].WebhookID)
	}

	// A configuration nobody listens to writes nothing.
	quiet, _ := w.Waiting(t, "refund")
	w.Approve(t, quiet)
	if n := w.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE run_id = ?`, quiet.RunID); n != 0 {
		t.Errorf("a run without notify entries wrote %d notifications", n)
	}
}

func TestNotificationsAtPrivacyFullCarryArgumentsAndAnswer(t *testing.T) {
	w := notifyWorld(t, notifyYAML("told-full", runtime.PrivacyFull, "decision_timeout: 1h\n"))
	paused, _ := w.Waiting(t, "told-full")
	rows := w.Outbox(t, paused.RunID)
	b := decodeBody(t, rows[0].Body)
	if !strings.Contains(string(rows[0].Body), "MARKER-ARGUMENT") || b.Data["calls"] == nil {
		t.Errorf("run.waiting at full = %s, want the calls with their arguments", rows[0].Body)
	}
	deadline, err := time.Parse(time.RFC3339, fmt.Sprint(b.Data["decision_deadline"]))
	if err != nil || time.Until(deadline) < 59*time.Minute || time.Until(deadline) > 61*time.Minute {
		t.Errorf("decision_deadline = %v (%v), want about an hour from now", b.Data["decision_deadline"], err)
	}
	if strings.Contains(string(rows[1].Body), "MARKER-ARGUMENT") {
		t.Errorf("slack text carries arguments: %s", rows[1].Body)
	}
	w.Approve(t, paused)
	rows = w.Outbox(t, paused.RunID)
	if b := decodeBody(t, rows[len(rows)-1].Body); !strings.HasPrefix(fmt.Sprint(b.Data["answer"]), "MARKER-ANSWER") {
		t.Errorf("run.settled at full = %v, want the answer", b.Data)
	}
}

// settledOnce checks that a run has exactly one run.settled with this
// status and reason.
func settledOnce(t *testing.T, w *testrig.World, runID int64, status runtime.Status, reason string) {
	t.Helper()
	var bodies [][]byte
	if err := w.DB.Select(&bodies, `SELECT body FROM webhook_deliveries WHERE run_id = ? AND event = 'run.settled'`, runID); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 1 {
		t.Fatalf("run %d has %d run.settled notifications, want 1", runID, len(bodies))
	}
	if b := decodeBody(t, bodies[0]); b.Data["status"] != string(status) || b.Data["termination_reason"] != reason {
		t.Errorf("run %d: run.settled data = %v, want status %s, termination_reason %s", runID, b.Data, status, reason)
	}
}

func TestRunSettledOncePerRunWhoeverFinishedIt(t *testing.T) {
	expiring := strings.Replace(notifyYAML("expiring-told", runtime.PrivacyMetadata, "decision_timeout: 1s\n"),
		"      - text: \"MARKER-ANSWER: refunded.\"", "      - text: \"MARKER-ANSWER: refunded.\"\n        if_denied:\n          text: \"not refunded\"", 1)
	w := notifyWorld(t, notifyYAML("told", runtime.PrivacyMetadata, ""), expiring)
	ctx := context.Background()
	approver, owner := w.Actor("approver"), w.Actor("owner")

	// In the request.
	inRequest, _ := w.Waiting(t, "told")
	w.Approve(t, inRequest)
	settledOnce(t, w, inRequest.RunID, runtime.StatusCompleted, runtime.ReasonCompleted)

	// By a worker, after a durable decision.
	durable, _ := w.Waiting(t, "told")
	if _, err := w.Engine.Decide(ctx, runtime.DecideRequest{RunID: durable.RunID, Digest: durable.Digest,
		Decision: runtime.DecisionApprove, Actor: approver, Path: runtime.PathDurable}); err != nil {
		t.Fatal(err)
	}
	stop := testrig.Work(t, w.NewEngine(runtime.Options{PublicURL: publicURL}), 1, 20*time.Millisecond)
	w.WaitStatus(t, durable.RunID, runtime.StatusCompleted, 10*time.Second)

	// Cancelled while it waits: nobody holds it.
	idle, _ := w.Waiting(t, "told")
	if res, err := w.Engine.Cancel(ctx, idle.RunID, owner); err != nil || res.Status != runtime.StatusCancelled {
		t.Fatalf("cancel of a waiting run = %+v, %v", res, err)
	}

	// Cancelled while it runs: its holder settles it at the next step.
	running, _ := w.Waiting(t, "told")
	c, err := w.Engine.Decide(ctx, runtime.DecideRequest{RunID: running.RunID, Digest: running.Digest,
		Decision: runtime.DecisionApprove, Actor: approver})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := w.Engine.Cancel(ctx, running.RunID, owner); err != nil || res.Status != runtime.StatusRunning {
		t.Fatalf("cancel of a running run = %+v, %v", res, err)
	}
	if out := c.Run(ctx, nil); out.Status != runtime.StatusCancelled {
		t.Fatalf("cancelled continuation ended %s (%v)", out.Status, out.Err)
	}

	// Expired: the worker denies it (run.expired in the claim's commit),
	// and the model's answer settles it.
	expired, _ := w.Waiting(t, "expiring-told")
	w.WaitStatus(t, expired.RunID, runtime.StatusCompleted, 15*time.Second)
	stop()

	settledOnce(t, w, durable.RunID, runtime.StatusCompleted, runtime.ReasonCompleted)
	settledOnce(t, w, idle.RunID, runtime.StatusCancelled, runtime.ReasonCancelled)
	settledOnce(t, w, running.RunID, runtime.StatusCancelled, runtime.ReasonCancelled)
	settledOnce(t, w, expired.RunID, runtime.StatusCompleted, runtime.ReasonCompleted)
	var events []string
	if err := w.DB.Select(&events, `SELECT event FROM webhook_deliveries WHERE run_id = ? AND format = 'standard' ORDER BY id`,
		expired.RunID); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(events, ","); got != "run.waiting,run.expired,run.settled" {
		t.Errorf("expired run's notifications = %s, want run.waiting,run.expired,run.settled", got)
	}
	var body []byte
	if err := w.DB.Get(&body, `SELECT body FROM webhook_deliveries WHERE run_id = ? AND event = 'run.expired'`, expired.RunID); err != nil {
		t.Fatal(err)
	}
	if b := decodeBody(t, body); b.Data["turn_digest"] != expired.Digest || b.Data["on_timeout"] != runtime.OnTimeoutDeny ||
		b.Data["status"] != string(runtime.StatusRunning) {
		t.Errorf("run.expired data = %v, want the expired turn's digest, on_timeout deny, status running", b.Data)
	}
}

func TestEscalationNotifiesTheEscalatedTurn(t *testing.T) {
	y := strings.Replace(notifyYAML("escalating-told", runtime.PrivacyMetadata, `tool_policies:
  refund_order: {decision_timeout: 1s, on_timeout: escalate, escalate_grant: refunds}
`), "identifier: escalating-told\n", "identifier: escalating-told\ndecision_timeout: 1h\n", 1)
	w := notifyWorld(t, y)
	paused, _ := w.Waiting(t, "escalating-told")
	testrig.Work(t, w.NewEngine(runtime.Options{PublicURL: publicURL}), 1, 20*time.Millisecond)
	r := w.WaitRun(t, paused.RunID, 15*time.Second, "escalated", func(r *runtime.Run) bool { return r.Turn == 2 && r.Status.Waiting() })
	var bodies [][]byte
	if err := w.DB.Select(&bodies, `SELECT body FROM webhook_deliveries WHERE run_id = ? AND event = 'run.escalated'`, paused.RunID); err != nil {
		t.Fatal(err)
	}
	if len(bodies) != 1 {
		t.Fatalf("run.escalated notifications = %d, want 1", len(bodies))
	}
	b := decodeBody(t, bodies[0])
	if b.Data["turn_digest"] != r.TurnDigest || b.Data["escalate_grant"] != "refunds" ||
		b.Data["decide_url"] != fmt.Sprintf("%s/inbox/runs/%d", publicURL, paused.RunID) || b.Data["decision_deadline"] == nil {
		t.Errorf("run.escalated data = %v, want the new turn's digest %s, the grant, the link and a deadline", b.Data, r.TurnDigest)
	}
	if n := w.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE run_id = ? AND event = 'run.expired'`, paused.RunID); n != 1 {
		t.Errorf("run.expired notifications = %d, want 1 (the first turn's expiry)", n)
	}
}

func TestNoNotificationForAStepThatDidNotCommit(t *testing.T) {
	w := notifyWorld(t, notifyYAML("told", runtime.PrivacyMetadata, ""))
	paused, _ := w.Waiting(t, "told")
	ctx := context.Background()
	note := []runtime.Delivery{{WebhookID: "msg_lost", RunID: paused.RunID, ConfigurationID: 1, Event: runtime.EventRunSettled,
		URL: "http://receiver.test/", Format: runtime.NotifyStandard, Body: []byte(`{}`)}}
	// A holder that does not hold the run.
	_, err := w.Store.Commit(ctx, runtime.Commit{RunID: paused.RunID, ClaimedBy: "not-the-holder", Status: runtime.StatusCompleted,
		TerminationReason: runtime.ReasonCompleted, Notifications: note})
	if !errors.Is(err, runtime.ErrLeaseLost) {
		t.Errorf("commit by a non-holder = %v, want ErrLeaseLost", err)
	}
	// A claim of a stale turn.
	err = w.Store.Claim(ctx, runtime.Claim{RunID: paused.RunID, From: runtime.StatusWaitingForApproval, Digest: strings.Repeat("0", 64),
		To: runtime.StatusRunning, ClaimedBy: "x", Lease: time.Minute,
		Decision: runtime.DecisionRecord{Kind: runtime.DecisionDeny, Scope: runtime.ScopeOnce, Path: runtime.PathExpiry}, Notifications: note})
	if !errors.Is(err, runtime.ErrClaimLost) {
		t.Errorf("claim of a stale turn = %v, want ErrClaimLost", err)
	}
	// A cancel of a run that moved.
	if err := w.Store.CancelIdle(ctx, paused.RunID, runtime.StatusDecided, nil, note); !errors.Is(err, runtime.ErrClaimLost) {
		t.Errorf("cancel from the wrong status = %v, want ErrClaimLost", err)
	}
	if n := w.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE webhook_id = 'msg_lost'`); n != 0 {
		t.Errorf("%d notifications of steps that did not commit are in the outbox", n)
	}
	// The same claim on the current turn wins and writes it.
	err = w.Store.Claim(ctx, runtime.Claim{RunID: paused.RunID, From: runtime.StatusWaitingForApproval, Digest: paused.Digest,
		To: runtime.StatusRunning, ClaimedBy: "x", Lease: time.Minute,
		Decision: runtime.DecisionRecord{Kind: runtime.DecisionDeny, Scope: runtime.ScopeOnce, Path: runtime.PathExpiry}, Notifications: note})
	if err != nil {
		t.Fatal(err)
	}
	if n := w.Count(t, `SELECT COUNT(*) FROM webhook_deliveries WHERE webhook_id = 'msg_lost'`); n != 1 {
		t.Errorf("the won claim wrote %d notifications, want 1", n)
	}
}

// TestEveryTurnNotifies: a follow-up's turn tells of its pause and its
// settle as the first turn did, with the turn's own digest.
func TestEveryTurnNotifies(t *testing.T) {
	w := notifyWorld(t, notifyYAML("told", runtime.PrivacyMetadata, ""))
	paused, _ := w.Waiting(t, "told")
	w.Approve(t, paused)
	before := len(w.Outbox(t, paused.RunID))
	c, err := w.Engine.SendMessage(context.Background(), runtime.MessageRequest{RunID: paused.RunID,
		Content: "and " + w.Order(t) + "?", Actor: w.Actor("owner")})
	if err != nil {
		t.Fatal(err)
	}
	second := c.Run(context.Background(), nil)
	rows := w.Outbox(t, paused.RunID)[before:]
	if len(rows) != 2 || rows[0].Event != runtime.EventRunWaiting || decodeBody(t, rows[0].Body).Data["turn_digest"] != second.Digest {
		t.Fatalf("turn 2's notifications at its pause = %+v, want run.waiting with its digest %s", rows, second.Digest)
	}
	w.Approve(t, second)
	rows = w.Outbox(t, paused.RunID)[before:]
	if len(rows) != 3 || rows[2].Event != runtime.EventRunSettled {
		t.Errorf("turn 2's notifications = %+v, want its run.settled last", rows)
	}
}
