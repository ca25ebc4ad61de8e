package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/seal"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// settledRun starts a refund run owned by owner and approves it, so that
// it has completed its first turn.
func (a *testApp) settledRun(t *testing.T, owner string) int64 {
	t.Helper()
	paused := a.start(t, "refund", owner, runtime.OriginInteractive)
	if out := a.Approve(t, paused); out.Status != runtime.StatusCompleted {
		t.Fatalf("run %d = %s, want completed", paused.RunID, out.Status)
	}
	return paused.RunID
}

// TestAPIFollowUp: a follow-up is answered as a start is — 201 with the
// run at its next turn and the turn's steps, a stream of the turn's lines,
// or at once with async — and refused with run_busy while the turn waits,
// with not_found for strangers, and with a clear message for bad bodies.
func TestAPIFollowUp(t *testing.T) {
	a := newApp(t, 0)
	id := a.settledRun(t, "owner")
	owner := a.bearer(t, "owner", "run:start", "run:read")

	got := owner.call(t, a, http.MethodPost, runPathAPI(id, "/messages"), `{"content":"now refund ORD-1002 too"}`, nil)
	body := got.wantKeys(t, http.StatusCreated, "run", "steps", "outcome")
	run := body["run"].(map[string]any)
	if run["status"] != "waiting_for_approval" || run["turn"] != float64(2) || run["turn_digest"] == nil {
		t.Errorf("run = %v, want turn 2 waiting with a digest", run)
	}
	if out := body["outcome"].(map[string]any); out["type"] != "awaiting_approval" {
		t.Errorf("outcome = %v", out)
	}
	if loc := got.header.Get("Location"); loc != runPathAPI(id, "") {
		t.Errorf("Location = %q", loc)
	}

	owner.call(t, a, http.MethodPost, runPathAPI(id, "/messages"), `{"content":"and more"}`, nil).
		wantError(t, http.StatusConflict, "run_busy")
	a.Approve(t, runtime.Outcome{RunID: id, Digest: a.Run(t, id).TurnDigest})

	for name, tc := range map[string]struct {
		who    caller
		body   string
		status int
		code   string
	}{
		"a stranger":       {a.bearer(t, "other", "run:start"), `{"content":"hi"}`, http.StatusNotFound, "not_found"},
		"an approver":      {a.bearer(t, "approver", "run:start"), `{"content":"hi"}`, http.StatusNotFound, "not_found"},
		"no run:start":     {a.bearer(t, "owner", "run:read"), `{"content":"hi"}`, http.StatusForbidden, "insufficient_scope"},
		"an empty message": {owner, `{"content":""}`, http.StatusBadRequest, "invalid_request"},
		"an unknown field": {owner, `{"content":"hi","prompt":"x"}`, http.StatusBadRequest, "invalid_request"},
	} {
		t.Run(name, func(t *testing.T) {
			before := a.State(t, id)
			tc.who.call(t, a, http.MethodPost, runPathAPI(id, "/messages"), tc.body, nil).wantError(t, tc.status, tc.code)
			a.Unchanged(t, id, before)
		})
	}
	missing := a.bearer(t, "other", "run:start").call(t, a, http.MethodPost, runPathAPI(id+1000, "/messages"), `{"content":"hi"}`, nil)
	stranger := a.bearer(t, "other", "run:start").call(t, a, http.MethodPost, runPathAPI(id, "/messages"), `{"content":"hi"}`, nil)
	if strings.ReplaceAll(string(missing.body), fmt.Sprint(id+1000), "N") != strings.ReplaceAll(string(stranger.body), fmt.Sprint(id), "N") {
		t.Errorf("a stranger's answer %s differs from a missing run's %s", stranger.body, missing.body)
	}

	// Streamed: the turn's lines, one terminal line; async: queued at once.
	lines := owner.call(t, a, http.MethodPost, runPathAPI(id, "/messages"), `{"content":"now refund ORD-1003"}`, ndjsonAccept).lines(t)
	wantStreamShape(t, lines, "awaiting_approval", true)
	a.Approve(t, runtime.Outcome{RunID: id, Digest: a.Run(t, id).TurnDigest})
	queued := owner.call(t, a, http.MethodPost, runPathAPI(id, "/messages"), `{"content":"and ORD-1004","async":true}`, nil).
		wantKeys(t, http.StatusCreated, "run")["run"].(map[string]any)
	if queued["status"] != "queued" || queued["turn"] != float64(4) {
		t.Errorf("async follow-up = %v, want queued at turn 4", queued)
	}
}

// TestAPIFollowUpStorm: 50 follow-ups at once through HTTP start one turn;
// the other 49 are 409 run_busy. They come from the owner and an admin, 25
// each: one user may have 32 API requests open at once.
func TestAPIFollowUpStorm(t *testing.T) {
	a := newApp(t, 0)
	id := a.settledRun(t, "owner")
	senders := []caller{a.bearer(t, "owner", "run:start", "run:read"), a.bearer(t, "admin", "run:start", "run:read")}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		statuses = map[int]int{}
	)
	for i := range 50 {
		wg.Go(func() {
			got := senders[i%2].call(t, a, http.MethodPost, runPathAPI(id, "/messages"), `{"content":"now refund ORD-7 too","async":true}`, nil)
			mu.Lock()
			statuses[got.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[http.StatusCreated] != 1 || statuses[http.StatusConflict] != 49 {
		t.Errorf("statuses = %v, want one 201 and 49 409", statuses)
	}
	if n := a.Count(t, `SELECT COUNT(*) FROM run_events WHERE run_id = ? AND kind = 'turn_started'`, id); n != 2 {
		t.Errorf("%d turns started, want 2", n)
	}
}

// TestRunPageFollowUpWithoutScript: the run page offers the form to its
// owner once the run settled; a native post runs the turn and lands back
// on the run page, which shows turn 2; a refusal is a flash there.
func TestRunPageFollowUpWithoutScript(t *testing.T) {
	a := newApp(t, 0)
	paused := a.start(t, "refund", "owner", runtime.OriginInteractive)
	owner := a.signIn(t, "owner")
	if _, page := owner.get(runPath(paused.RunID, "")); strings.Contains(page, `data-testid="followup"`) {
		t.Error("a waiting run's page offers a follow-up")
	}
	a.Approve(t, paused)
	_, page := owner.get(runPath(paused.RunID, ""))
	if !strings.Contains(page, `data-testid="followup"`) || !strings.Contains(page, `action="/runs/`+fmt.Sprint(paused.RunID)+`/messages"`) {
		t.Fatalf("the settled run's page has no follow-up form:\n%s", page)
	}
	res, _ := owner.post(runPath(paused.RunID, "/messages"), url.Values{"content": {"now refund ORD-1002 too"}})
	wantRedirect(t, res, runPath(paused.RunID, ""))
	r := a.Run(t, paused.RunID)
	if r.ConversationTurn != 2 || r.Status != runtime.StatusWaitingForApproval {
		t.Fatalf("after the follow-up: %s at turn %d, want turn 2 waiting", r.Status, r.ConversationTurn)
	}
	_, page = owner.get(runPath(paused.RunID, ""))
	if !strings.Contains(page, `data-testid="step-turn" data-turn="2"`) {
		t.Errorf("the run page does not mark turn 2:\n%s", page)
	}
	res, _ = owner.post(runPath(paused.RunID, "/messages"), url.Values{"content": {"and more"}})
	wantRedirect(t, res, runPath(paused.RunID, ""))
	if _, page = owner.get(runPath(paused.RunID, "")); !strings.Contains(page, "has not ended") {
		t.Errorf("a busy run's refusal is not the run page's flash")
	}
	if _, err := a.Engine.Cancel(context.Background(), paused.RunID, a.Users["owner"].Actor()); err != nil {
		t.Fatal(err)
	}
	// Another user's post is refused as for a missing run.
	res, _ = a.signIn(t, "other").post(runPath(paused.RunID, "/messages"), url.Values{"content": {"hi"}})
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("a stranger's follow-up: %d, want 404", res.StatusCode)
	}
}

// TestFollowUpSealed: with state keys set a follow-up's message is stored
// sealed wherever it is kept (the transcript, the turn_started event, the
// checkpoint), and reads back on the run page for its owner.
func TestFollowUpSealed(t *testing.T) {
	keys, err := seal.Parse("A:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xA1}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	a := newAppWith(t, 0, appEngine{sealer: keys})
	id := a.settledRun(t, "owner")
	const marker = "SEALED-FOLLOWUP-7d1c"
	a.bearer(t, "owner", "run:start", "run:read").call(t, a, http.MethodPost, runPathAPI(id, "/messages"),
		`{"content":"now refund ORD-1002 too `+marker+`"}`, nil).wantKeys(t, http.StatusCreated, "run")
	for _, q := range []string{
		`SELECT COUNT(*) FROM run_messages WHERE run_id = ? AND INSTR(body, ?) > 0`,
		`SELECT COUNT(*) FROM run_events WHERE run_id = ? AND INSTR(payload, ?) > 0`,
		`SELECT COUNT(*) FROM runs WHERE id = ? AND INSTR(state, ?) > 0`,
	} {
		if n := a.Count(t, q, id, marker); n != 0 {
			t.Errorf("%s: %d rows hold the message in plain text", q, n)
		}
	}
	if n := a.Count(t, `SELECT COUNT(*) FROM run_messages WHERE run_id = ? AND turn = 2`, id); n == 0 {
		t.Error("turn 2 stored no message")
	}
	if _, page := a.signIn(t, "owner").get(runPath(id, "")); !strings.Contains(page, `data-testid="step-turn" data-turn="2"`) {
		t.Errorf("the run page does not show turn 2")
	}
}

// TestFollowUpReadsAsAConversation: after a real follow-up, the messages
// API pages both turns, turn 2 opening with the person's message, and the
// run page shows the conversation's turn 2 above its form.
func TestFollowUpReadsAsAConversation(t *testing.T) {
	a := newApp(t, 0)
	id := a.settledRun(t, "owner")
	owner := a.bearer(t, "owner", "run:start", "run:read")
	owner.call(t, a, http.MethodPost, runPathAPI(id, "/messages"), `{"content":"now refund ORD-1002 too"}`, nil).
		wantKeys(t, http.StatusCreated, "run")
	list := owner.call(t, a, http.MethodGet, runPathAPI(id, "/messages?limit=200"), "", nil).wantKeys(t, http.StatusOK, "messages")
	var turn2 []map[string]any
	for _, m := range list["messages"].([]any) {
		if m := m.(map[string]any); m["turn"] == float64(2) {
			turn2 = append(turn2, m)
		}
	}
	if len(turn2) < 2 || turn2[0]["role"] != "user" || turn2[0]["content"] != "now refund ORD-1002 too" || turn2[1]["role"] != "assistant" {
		t.Errorf("turn 2's messages = %v, want the person's message, then the model's", turn2)
	}
	_, page := a.signIn(t, "owner").get(runPath(id, ""))
	conv, form := strings.Index(page, `data-testid="conversation"`), strings.Index(page, `data-testid="followup"`)
	if !strings.Contains(page, "now refund ORD-1002 too") || conv < 0 || (form >= 0 && form < conv) {
		t.Errorf("the run page does not show turn 2's message in its conversation above the form (conversation at %d, form at %d)", conv, form)
	}
}

// TestFollowAllAcrossTurns: one event stream with follow=all follows a run
// through a follow-up's turn, its pause, a decision made by another
// request, and its settle, and stays attached after it: keepalives, no
// end. Every event line names its turn.
func TestFollowAllAcrossTurns(t *testing.T) {
	a := newApp(t, 150*time.Millisecond)
	id := a.settledRun(t, "owner")
	owner := a.signIn(t, "owner")
	_, st := openEvents(t, owner, id, "follow=all")
	attached := st.Next(t, 5*time.Second)
	if attached.Type() != "attached" || attached.Int("turn") != 1 {
		t.Fatalf("first line = %s, want attached at turn 1", attached)
	}
	turnOne := st.WaitFor(t, 5*time.Second, "turn 1's settle", func(l testrig.Line) bool {
		return l.Type() == "event" && l.Value["kind"] == "settle"
	})
	if turnOne.Int("turn") != 1 {
		t.Errorf("turn 1's settle = %s", turnOne)
	}
	st.WaitFor(t, 5*time.Second, "a keepalive while the run is settled", func(l testrig.Line) bool { return l.Type() == "keepalive" })

	api := a.bearer(t, "owner", "run:start", "run:read", "run:decide")
	api.call(t, a, http.MethodPost, runPathAPI(id, "/messages"), `{"content":"now refund ORD-1002 too"}`, nil).
		wantKeys(t, http.StatusCreated, "run")
	st.WaitFor(t, 10*time.Second, "turn 2's pause", func(l testrig.Line) bool {
		return l.Type() == "event" && l.Value["kind"] == "suspend" && l.Int("turn") == 2
	})
	digest := a.Run(t, id).TurnDigest
	a.bearer(t, "approver", "run:decide").call(t, a, http.MethodPost, runPathAPI(id, "/decisions"), approveBody(t, digest), nil).
		wantKeys(t, http.StatusOK, "steps", "outcome")
	settled := st.WaitFor(t, 10*time.Second, "turn 2's settle", func(l testrig.Line) bool {
		return l.Type() == "event" && l.Value["kind"] == "settle" && l.Int("turn") == 2
	})
	st.WaitFor(t, 5*time.Second, "a keepalive after turn 2 settled", func(l testrig.Line) bool {
		return l.Type() == "keepalive" && l.Arrived.After(settled.Arrived)
	})
	seqs := map[int]bool{}
	for _, l := range st.Lines() {
		switch l.Type() {
		case "end", "error":
			t.Errorf("the stream ended: %s", l)
		case "event":
			if seqs[l.Int("seq")] {
				t.Errorf("event %d sent twice", l.Int("seq"))
			}
			seqs[l.Int("seq")] = true
			if l.Int("turn") < 1 {
				t.Errorf("event line without its turn: %s", l)
			}
		}
	}
	if stored, _ := a.storedSeqs(t, id); len(seqs) != len(stored) {
		t.Errorf("the stream sent %d events, the run has %d", len(seqs), len(stored))
	}
	// Erased, the run is gone: the stream ends.
	a.bearer(t, "owner", "run:cancel").call(t, a, http.MethodDelete, runPathAPI(id, "?erase=true"), "", nil).
		wantKeys(t, http.StatusOK, "erased")
	if end := st.WaitFor(t, 5*time.Second, "the end of the erased run's stream", func(l testrig.Line) bool {
		return l.Type() == "end"
	}); end.Value["status"] != "erased" {
		t.Errorf("last line = %s, want end, erased", end)
	}
}
