package web_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestDeletedOwnersRunsCannotBeDecided: once its owner is deleted, a run
// that waited is refused on every decision surface as a run that no
// longer waits — in the inbox, with a flash, and in the API, 409
// not_waiting — and nothing runs; the deleted user's session and token no
// longer let them in.
func TestDeletedOwnersRunsCannotBeDecided(t *testing.T) {
	a := newApp(t, 0)
	paused, order := a.Waiting(t, "refund")
	approver := a.signIn(t, "approver")
	approverAPI := a.bearer(t, "approver", "run:decide")
	owner := a.signIn(t, "owner")
	ownerAPI := a.bearer(t, "owner", "run:read")

	if _, err := a.Engine.DeleteUser(context.Background(), a.Users["owner"].ID); err != nil {
		t.Fatal(err)
	}
	before := a.State(t, paused.RunID)

	res, _ := approver.post(inboxPath(paused.RunID, "decision"), approve(paused.Digest))
	wantRedirect(t, res, "/inbox")
	if got, want := approver.flashText(), fmt.Sprintf("Run %d no longer waits for this decision.", paused.RunID); got != want {
		t.Errorf("the inbox's flash = %q, want %q", got, want)
	}
	approverAPI.call(t, a, http.MethodPost, runPathAPI(paused.RunID, "/decisions"), approveBody(t, paused.Digest), nil).
		wantError(t, http.StatusConflict, "not_waiting")
	a.Unchanged(t, paused.RunID, before)
	if n := a.Refunds(t, order); n != 0 {
		t.Errorf("order %s refunded %d times", order, n)
	}
	if r := a.Run(t, paused.RunID); r.Status != runtime.StatusCancelled || r.TerminationReason != runtime.ReasonOwnerDeleted {
		t.Errorf("run %d is %s (%q), want cancelled (%s)", paused.RunID, r.Status, r.TerminationReason, runtime.ReasonOwnerDeleted)
	}

	res, _ = owner.get("/inbox")
	wantRedirect(t, res, "/login")
	ownerAPI.call(t, a, http.MethodGet, runPathAPI(paused.RunID, ""), "", nil).wantError(t, http.StatusUnauthorized, "unauthorized")
}
