package web_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/seal"
)

// TestSealedContentOutOfPlaceReadsAsUnreadable: with state keys set, a
// prompt copied with SQL from another run's row and a plain answer written
// over a sealed one show on the run page and in the API as unreadable
// (200, never a 500 or the other run's text), and a decision on a run
// holding another run's state is refused with unreadable_state.
func TestSealedContentOutOfPlaceReadsAsUnreadable(t *testing.T) {
	keys, err := seal.Parse("A:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xA1}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	a := newAppWith(t, 0, appEngine{sealer: keys})
	x := a.start(t, "refund", "owner", runtime.OriginInteractive)
	y := a.start(t, "refund", "owner", runtime.OriginInteractive)
	a.Approve(t, y)
	xPrompt := a.promptOf(t, x.RunID)
	if _, err := a.DB.Exec(`UPDATE runs SET prompt = (SELECT prompt FROM (SELECT prompt FROM runs WHERE id = ?) AS x),
		answer = 'PLAIN-ANSWER' WHERE id = ?`, x.RunID, y.RunID); err != nil {
		t.Fatal(err)
	}

	res, body := a.signIn(t, "owner").get(runPath(y.RunID, ""))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("run page = %d, want 200:\n%s", res.StatusCode, body)
	}
	if strings.Contains(body, xPrompt) || strings.Contains(body, "PLAIN-ANSWER") || !strings.Contains(body, "sealed") {
		t.Errorf("the run page shows %q or the plain answer, or no note that its content is unreadable:\n%s", xPrompt, body)
	}
	got := a.bearer(t, "owner", "run:read").call(t, a, http.MethodGet, runPathAPI(y.RunID, ""), "", nil).wantKeys(t, http.StatusOK, "run")
	if answer, _ := got["run"].(map[string]any)["answer"].(string); answer == "PLAIN-ANSWER" || !strings.Contains(answer, "sealed") {
		t.Errorf("GET the run: answer %q, want it unreadable", answer)
	}

	// Another run's state, moved into x's row: nobody may decide x on it.
	z := a.start(t, "refund", "owner", runtime.OriginInteractive)
	if _, err := a.DB.Exec(`UPDATE runs SET state = (SELECT state FROM (SELECT state FROM runs WHERE id = ?) AS z) WHERE id = ?`,
		z.RunID, x.RunID); err != nil {
		t.Fatal(err)
	}
	before := a.State(t, x.RunID)
	a.bearer(t, "approver", "run:decide").call(t, a, http.MethodPost, runPathAPI(x.RunID, "/decisions"),
		approveBody(t, x.Digest), nil).wantError(t, http.StatusInternalServerError, "unreadable_state")
	a.Unchanged(t, x.RunID, before)
}

// promptOf reads a run's prompt as the engine opens it for its owner.
func (a *testApp) promptOf(t *testing.T, id int64) string {
	t.Helper()
	run, _, err := a.Engine.Visible(t.Context(), id, a.Actor("owner"))
	if err != nil {
		t.Fatal(err)
	}
	return run.Prompt
}
