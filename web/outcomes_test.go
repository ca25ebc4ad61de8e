package web_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestNativeDecisionFlashesTheOutcome: after a POST without JavaScript the
// next page names how the continuation ended.
func TestNativeDecisionFlashesTheOutcome(t *testing.T) {
	a := newApp(t, 0)
	tests := []struct {
		name       string
		cfg        string
		action     string
		form       func(digest string) url.Values
		wantFlash  string // with %d for the run id
		wantStatus runtime.Status
		wantReason string
	}{
		{name: "completed", cfg: "refund", action: "decision", form: approve,
			wantFlash: "You approved refund_order; run %d completed: the agent finished.", wantStatus: runtime.StatusCompleted, wantReason: runtime.ReasonCompleted},
		{name: "completed after a denial", cfg: "refund", action: "decision",
			form: func(d string) url.Values {
				f := approve(d)
				f.Set("decision", "deny")
				f.Set("reason", "not eligible")
				return f
			},
			wantFlash: "You denied refund_order; run %d completed: the agent finished.", wantStatus: runtime.StatusCompleted, wantReason: runtime.ReasonCompleted},
		{name: "completed after an answer", cfg: "input", action: "input", form: answerForm,
			wantFlash: "You answered ask_operator; run %d completed: the agent finished.", wantStatus: runtime.StatusCompleted, wantReason: runtime.ReasonCompleted},
		{name: "waiting again", cfg: "twice", action: "decision", form: approve,
			wantFlash: "You approved refund_order; run %d continued and waits for a decision again.", wantStatus: runtime.StatusWaitingForApproval},
		{name: "failed", cfg: "short", action: "decision", form: approve,
			wantFlash: "You approved refund_order; run %d failed: it reached its limit of rounds.", wantStatus: runtime.StatusFailed, wantReason: runtime.ReasonMaxIterations},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			paused, _ := a.Waiting(t, tt.cfg)
			c := a.signIn(t, "approver")
			res, _ := c.post(inboxPath(paused.RunID, tt.action), tt.form(paused.Digest))
			wantRedirect(t, res, "/inbox")
			if got, want := c.flashText(), fmt.Sprintf(tt.wantFlash, paused.RunID); got != want {
				t.Errorf("flash = %q, want %q", got, want)
			}
			run := a.Run(t, paused.RunID)
			if run.Status != tt.wantStatus || run.TerminationReason != tt.wantReason {
				t.Errorf("run is %s (%q), want %s (%q)", run.Status, run.TerminationReason, tt.wantStatus, tt.wantReason)
			}
			if run.Status.Waiting() {
				// The inbox offers the new turn, not the one just decided.
				_, body := c.get("/inbox")
				card := inboxCard(t, body, paused.RunID)
				if !strings.Contains(card, `value="`+run.TurnDigest+`"`) || strings.Contains(card, paused.Digest) {
					t.Errorf("the inbox offers run %d's old turn, want the new digest %s", paused.RunID, run.TurnDigest)
				}
			}
		})
	}
}

// TestCancelWhileADecisionRuns: the owner cancels a run whose continuation
// runs inside the approver's request; the owner's answer waits for the
// holder to stop and says it was cancelled, and so does the approver's
// flash.
func TestCancelWhileADecisionRuns(t *testing.T) {
	a := newApp(t, 0)
	paused, _ := a.Waiting(t, "crawl")
	id := paused.RunID
	approver := a.signIn(t, "approver")
	owner := a.signIn(t, "owner")

	type answer struct {
		res *http.Response
		err error
	}
	done := make(chan answer, 1)
	go func() {
		// Not through client.do: it may call t.Fatal, which only the test
		// goroutine may.
		res, err := approver.http.Do(approver.postRequest(inboxPath(id, "decision"), approve(paused.Digest), ""))
		if err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		done <- answer{res, err}
	}()

	a.WaitStatus(t, id, runtime.StatusRunning, 10*time.Second)
	res, _ := owner.post(runPath(id, "/cancel"), url.Values{})
	wantRedirect(t, res, runPath(id, ""))
	if got, want := owner.flashText(), fmt.Sprintf("Run %d was cancelled.", id); got != want {
		t.Errorf("owner's flash = %q, want %q", got, want)
	}

	var got answer
	select {
	case got = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the approval's request did not end 30 s after the cancel")
	}
	if got.err != nil {
		t.Fatal(got.err)
	}
	wantRedirect(t, got.res, "/inbox")
	if got, want := approver.flashText(), fmt.Sprintf("You approved refund_order; run %d was cancelled.", id); got != want {
		t.Errorf("approver's flash = %q, want %q", got, want)
	}
	if run := a.Run(t, id); run.Status != runtime.StatusCancelled || run.TerminationReason != runtime.ReasonCancelled {
		t.Errorf("run is %s (%q), want cancelled", run.Status, run.TerminationReason)
	}
}
