package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
	"github.com/turnstile-dev/turnstile/web"
)

// aliveWorkers says a worker lives, for the admission of durable
// decisions; the tests run one with testrig.Work.
type aliveWorkers struct{}

func (aliveWorkers) WorkersAlive(context.Context, time.Duration) (int, error) { return 1, nil }

// staleDigest names no turn of any run.
var staleDigest = strings.Repeat("ab", 32)

// bulkField is a run field of the bulk form.
func bulkField(out runtime.Outcome, digest string) string {
	return fmt.Sprintf("%d:%s", out.RunID, digest)
}

// A streamed bulk of 100 with 3 stale digests: one response, first the
// claimed line (97 runs, 3 refused as stale_turn), the progress of each
// run, a settled line per claimed run, and a done line counting 97 and 3;
// every claimed run refunded exactly once, the stale runs untouched.
func TestInboxBulkStreamed(t *testing.T) {
	a := newApp(t, 0)
	const n, stale = 100, 3
	form := url.Values{"decision": {"approve"}, "scope": {"once"}, "reason": {"bulk"}}
	var runs []runtime.Outcome
	staleRuns := map[int64]bool{}
	for i := range n {
		out, _ := a.Waiting(t, "refund")
		runs = append(runs, out)
		digest := out.Digest
		if i%33 == 5 && len(staleRuns) < stale {
			digest, staleRuns[out.RunID] = staleDigest, true
		}
		form.Add("run", bulkField(out, digest))
	}
	c := a.signIn(t, "approver")
	res, err := c.http.Do(c.postRequest("/inbox/decisions", form, "application/x-ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", res.StatusCode)
	}
	lines := testrig.ReadAll(t, res.Body)
	res.Body.Close()
	if len(lines) < 2 || lines[0].Type() != "claimed" || lines[len(lines)-1].Type() != "done" {
		t.Fatalf("lines %v: want claimed first and done last", lines)
	}
	var first struct {
		Runs    []int64 `json:"runs"`
		Refused []struct {
			Run  int64  `json:"run"`
			Code string `json:"code"`
		} `json:"refused"`
	}
	if err := json.Unmarshal([]byte(lines[0].Raw), &first); err != nil {
		t.Fatal(err)
	}
	if len(first.Runs) != n-stale || len(first.Refused) != stale {
		t.Errorf("claimed %d, refused %d; want %d and %d", len(first.Runs), len(first.Refused), n-stale, stale)
	}
	for _, r := range first.Refused {
		if !staleRuns[r.Run] || r.Code != string(runtime.CodeStaleTurn) {
			t.Errorf("refused %+v, want one of the stale runs as stale_turn", r)
		}
	}
	settled, progress := map[int64]int{}, map[int64]int{}
	for _, l := range lines[1 : len(lines)-1] {
		id := int64(l.Int("run"))
		switch l.Type() {
		case "settled":
			settled[id]++
		case "progress":
			if l.Int("steps") != progress[id]+1 {
				t.Errorf("run %d: progress %d after %d", id, l.Int("steps"), progress[id])
			}
			progress[id] = l.Int("steps")
		case "keepalive":
		default:
			t.Errorf("unexpected line %s", l.Raw)
		}
		if strings.Contains(l.Raw, "MARKER") {
			t.Errorf("a bulk line shows content: %s", l.Raw)
		}
	}
	last := lines[len(lines)-1]
	if last.Int("settled") != n-stale || last.Int("refused") != stale {
		t.Errorf("done = %s, want settled %d refused %d", last.Raw, n-stale, stale)
	}
	for _, out := range runs {
		r := a.Run(t, out.RunID)
		if staleRuns[out.RunID] {
			if r.Status != runtime.StatusWaitingForApproval || r.TurnDigest != out.Digest || len(a.Decisions(t, out.RunID)) != 0 {
				t.Errorf("stale run %d moved: %s", out.RunID, r.Status)
			}
			continue
		}
		if settled[out.RunID] != 1 || progress[out.RunID] == 0 || r.Status != runtime.StatusCompleted {
			t.Errorf("run %d: %d settled lines, %d steps, %s; want 1, some, completed", out.RunID, settled[out.RunID], progress[out.RunID], r.Status)
		}
	}
	if got := a.Count(t, `SELECT COUNT(*) FROM demo_refunds`); got != n-stale {
		t.Errorf("demo_refunds has %d rows, want %d", got, n-stale)
	}
	if got, want := c.flash(), "Approved 97 runs: 97 completed. 3 refused:"; !strings.HasPrefix(got, want) {
		t.Errorf("flash %q, want it to start %q", got, want)
	}
}

// The API bulk without a stream, a worker alive: the durable path for
// all, 200 with a result per run in order, and the worker executes every
// claimed run once.
func TestAPIBulkDurable(t *testing.T) {
	a := newApp(t, 0, func(d *web.Deps) { d.Workers = aliveWorkers{} })
	var entries []string
	var good []runtime.Outcome
	for range 6 {
		out, _ := a.Waiting(t, "refund")
		good = append(good, out)
		entries = append(entries, fmt.Sprintf(`{"run_id":%d,"turn_digest":%q,"decision":"approve"}`, out.RunID, out.Digest))
	}
	stale, _ := a.Waiting(t, "refund")
	entries = append(entries[:3], append([]string{
		fmt.Sprintf(`{"run_id":%d,"turn_digest":%q,"decision":"approve"}`, stale.RunID, staleDigest),
		fmt.Sprintf(`{"run_id":99999,"turn_digest":%q,"decision":"approve"}`, staleDigest),
	}, entries[3:]...)...)
	got := a.bearer(t, "approver", "run:decide").call(t, a, http.MethodPost, "/api/decisions",
		`{"decisions":[`+strings.Join(entries, ",")+`]}`, nil)
	if got.status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", got.status, got.body)
	}
	var body struct {
		Results []struct {
			RunID  int64  `json:"run_id"`
			Status string `json:"status"`
		} `json:"results"`
	}
	if err := json.Unmarshal(got.body, &body); err != nil {
		t.Fatal(err)
	}
	want := []string{"claimed", "claimed", "claimed", "stale_turn", "not_found", "claimed", "claimed", "claimed"}
	if len(body.Results) != len(want) {
		t.Fatalf("results %s, want %d", got.body, len(want))
	}
	for i, w := range want {
		if body.Results[i].Status != w {
			t.Errorf("result %d = %+v, want %s", i, body.Results[i], w)
		}
	}
	for _, out := range good {
		if r := a.Run(t, out.RunID); r.Status != runtime.StatusDecided {
			t.Errorf("run %d is %s right after the answer, want decided", out.RunID, r.Status)
		}
	}
	testrig.Work(t, a.Engine, 2, 10*time.Millisecond)
	for _, out := range good {
		a.WaitStatus(t, out.RunID, runtime.StatusCompleted, 20*time.Second)
	}
	if n := a.Count(t, `SELECT COUNT(*) FROM demo_refunds`); n != len(good) {
		t.Errorf("demo_refunds has %d rows, want %d", n, len(good))
	}
	if r := a.Run(t, stale.RunID); r.Status != runtime.StatusWaitingForApproval {
		t.Errorf("the stale run is %s", r.Status)
	}
}

// The API bulk streamed: the same lines as the inbox's.
func TestAPIBulkStreamed(t *testing.T) {
	a := newApp(t, 0)
	x, _ := a.Waiting(t, "refund")
	y, _ := a.Waiting(t, "refund")
	body := fmt.Sprintf(`{"decisions":[{"run_id":%d,"turn_digest":%q,"decision":"deny","reason":"no"},{"run_id":%d,"turn_digest":%q,"decision":"deny"}]}`,
		x.RunID, x.Digest, y.RunID, y.Digest)
	got := a.bearer(t, "approver", "run:decide").call(t, a, http.MethodPost, "/api/decisions", body,
		http.Header{"Accept": {"application/x-ndjson"}})
	lines := got.lines(t)
	if len(lines) < 4 || lines[0]["type"] != "claimed" || lines[len(lines)-1]["type"] != "done" ||
		lines[len(lines)-1]["settled"] != float64(2) || lines[len(lines)-1]["refused"] != float64(0) {
		t.Fatalf("lines %s", got.body)
	}
	for _, out := range []runtime.Outcome{x, y} {
		if r := a.Run(t, out.RunID); r.Status != runtime.StatusCompleted {
			t.Errorf("run %d is %s, want completed after the denial", out.RunID, r.Status)
		}
	}
	if n := a.Count(t, `SELECT COUNT(*) FROM demo_refunds`); n != 0 {
		t.Errorf("%d refunds after denials", n)
	}
}

// Every malformed bulk is refused whole, 400 with a message that says
// what to mend, and writes nothing at all.
func TestBulkBadInput(t *testing.T) {
	a := newApp(t, 0)
	x, _ := a.Waiting(t, "refund")
	y, _ := a.Waiting(t, "refund")
	before := a.State(t, x.RunID)
	fx, fy := bulkField(x, x.Digest), bulkField(y, y.Digest)
	many := make([]string, runtime.MaxBulk+1)
	for i := range many {
		many[i] = fmt.Sprintf("%d:%s", i+1, staleDigest)
	}
	c := a.signIn(t, "approver")
	forms := []struct {
		name string
		form url.Values
		want string
	}{
		{"no run", url.Values{"decision": {"approve"}}, "Select at least one run"},
		{"not id:digest", url.Values{"decision": {"approve"}, "run": {fx, "12"}}, "is not &lt;run id&gt;:&lt;turn digest"},
		{"short digest", url.Values{"decision": {"approve"}, "run": {fmt.Sprintf("%d:abc", x.RunID)}}, "is not &lt;run id&gt;"},
		{"id with a sign", url.Values{"decision": {"approve"}, "run": {"+" + fx}}, "is not &lt;run id&gt;"},
		{"twice", url.Values{"decision": {"approve"}, "run": {fx, fy, fx}}, fmt.Sprintf("Run %d is selected twice", x.RunID)},
		{"too many", url.Values{"decision": {"approve"}, "run": many}, "at most 500 runs"},
		{"no decision", url.Values{"run": {fx}}, "Decision must be approve or deny"},
		{"bad decision", url.Values{"decision": {"maybe"}, "run": {fx}}, "Decision must be approve or deny"},
		{"bad scope", url.Values{"decision": {"approve"}, "scope": {"forever"}, "run": {fx}}, "Scope must be once or session"},
	}
	for _, tc := range forms {
		t.Run("inbox/"+tc.name, func(t *testing.T) {
			res, body := c.post("/inbox/decisions", tc.form)
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, tc.want) {
				t.Errorf("status %d, want 400 with %q in the page", res.StatusCode, tc.want)
			}
		})
	}
	entry := func(id int64, digest, decision string) string {
		return fmt.Sprintf(`{"run_id":%d,"turn_digest":%q,"decision":%q}`, id, digest, decision)
	}
	var manyJSON []string
	for i := range runtime.MaxBulk + 1 {
		manyJSON = append(manyJSON, entry(int64(i+1), staleDigest, "approve"))
	}
	apis := []struct {
		name, body, code, want string
	}{
		{"empty", `{"decisions":[]}`, "invalid_bulk", "decisions is required"},
		{"none", `{}`, "invalid_bulk", "decisions is required"},
		{"too many", `{"decisions":[` + strings.Join(manyJSON, ",") + `]}`, "invalid_bulk", "at most 500"},
		{"mixed", `{"decisions":[` + entry(x.RunID, x.Digest, "approve") + "," + entry(y.RunID, y.Digest, "deny") + `]}`, "invalid_bulk", "either approves or denies"},
		{"bad digest", `{"decisions":[` + entry(x.RunID, "xyz", "approve") + `]}`, "invalid_bulk", "decisions[0].turn_digest"},
		{"no run id", `{"decisions":[` + entry(0, x.Digest, "approve") + `]}`, "invalid_bulk", "decisions[0].run_id"},
		{"twice", `{"decisions":[` + entry(x.RunID, x.Digest, "approve") + "," + entry(x.RunID, x.Digest, "approve") + `]}`, "invalid_bulk", "named twice"},
		{"bad decision", `{"decisions":[` + entry(x.RunID, x.Digest, "maybe") + `]}`, "invalid_bulk", "decision must be approve or deny"},
		{"bad scope", `{"decisions":[{"run_id":1,"turn_digest":"` + staleDigest + `","decision":"approve","scope":"forever"}]}`, "invalid_bulk", "scope must be"},
		{"unknown field", `{"decisions":[{"run":1}]}`, "invalid_request", "unknown field"},
	}
	api := a.bearer(t, "approver", "run:decide")
	for _, tc := range apis {
		t.Run("api/"+tc.name, func(t *testing.T) {
			got := api.call(t, a, http.MethodPost, "/api/decisions", tc.body, nil)
			e := got.wantError(t, http.StatusBadRequest, tc.code)
			if msg, _ := e["message"].(string); !strings.Contains(msg, tc.want) {
				t.Errorf("message %q, want %q in it", msg, tc.want)
			}
		})
	}
	if n := a.Count(t, `SELECT COUNT(*) FROM decisions`); n != 0 {
		t.Errorf("%d decisions written by refused bulks", n)
	}
	a.Unchanged(t, x.RunID, before)
	if r := a.Run(t, y.RunID); r.Status != runtime.StatusWaitingForApproval || r.TurnDigest != y.Digest {
		t.Errorf("run y moved: %s", r.Status)
	}
}

// Per-run refusals in the inbox: a process run, a four-eyes run of the
// approver's own, a run the user may not decide; the others go through,
// and the flash counts both, in the table's words.
func TestInboxBulkNativeRefusals(t *testing.T) {
	a := newApp(t, 0)
	good, _ := a.Waiting(t, "refund")
	process := a.start(t, "refund", "owner", runtime.OriginProcess)
	own := a.start(t, "four-eyes", "approver", runtime.OriginInteractive)
	c := a.signIn(t, "approver")
	res, _ := c.post("/inbox/decisions", url.Values{"decision": {"approve"},
		"run": {bulkField(good, good.Digest), bulkField(process, process.Digest), bulkField(own, own.Digest)}})
	wantRedirect(t, res, "/inbox")
	flash := c.flashText()
	for _, want := range []string{"Approved 1 run: 1 completed.", "2 refused:",
		fmt.Sprintf("Run %d is decided by the process that started it", process.RunID),
		fmt.Sprintf("Someone else has to approve run %d", own.RunID)} {
		if !strings.Contains(flash, want) {
			t.Errorf("flash %q, want %q in it", flash, want)
		}
	}
	if r := a.Run(t, good.RunID); r.Status != runtime.StatusCompleted {
		t.Errorf("the good run is %s", r.Status)
	}
	for _, id := range []int64{process.RunID, own.RunID} {
		if len(a.Decisions(t, id)) != 0 {
			t.Errorf("refused run %d has a decision", id)
		}
	}
}

// The inbox offers the bulk form: a checkbox per approval card that
// belongs to it, and "select all on this page" as a link that checks
// them all without JavaScript.
func TestInboxBulkMarkup(t *testing.T) {
	a := newApp(t, 0)
	x, _ := a.Waiting(t, "refund")
	in, _ := a.Waiting(t, "input")
	c := a.signIn(t, "approver")
	_, body := c.get("/inbox")
	box := fmt.Sprintf(`value="%d:%s"`, x.RunID, x.Digest)
	if !strings.Contains(body, `id="bulk"`) || !strings.Contains(body, box) || !strings.Contains(body, `form="bulk"`) {
		t.Fatalf("the inbox lacks the bulk form or run %d's box", x.RunID)
	}
	if strings.Contains(inboxCard(t, body, in.RunID), `data-testid="bulk-select"`) {
		t.Error("an input turn has a bulk checkbox")
	}
	if strings.Contains(inboxCard(t, body, x.RunID), box+" checked") {
		t.Error("a box is checked before select all")
	}
	_, body = c.get("/inbox?select=all")
	if !strings.Contains(inboxCard(t, body, x.RunID), box+" checked") || !strings.Contains(body, `data-testid="select-none"`) {
		t.Error("select=all does not check the boxes")
	}
}

// With --max-continuations 2, a streamed bulk of 5 runs two in the
// request; the three beyond the slots go to the durable path while a
// worker lives, and without one each waits in the request for a slot.
func TestBulkBeyondTheSlots(t *testing.T) {
	for _, worker := range []bool{true, false} {
		t.Run(fmt.Sprintf("worker=%v", worker), func(t *testing.T) {
			a := newApp(t, 0, func(d *web.Deps) {
				d.MaxContinuations = 2
				if worker {
					d.Workers = aliveWorkers{}
				}
			})
			form := url.Values{"decision": {"approve"}}
			var runs []runtime.Outcome
			for range 5 {
				out, _ := a.Waiting(t, "refund")
				runs = append(runs, out)
				form.Add("run", bulkField(out, out.Digest))
			}
			c := a.signIn(t, "approver")
			res, err := c.http.Do(c.postRequest("/inbox/decisions", form, "application/x-ndjson"))
			if err != nil {
				t.Fatal(err)
			}
			lines := testrig.ReadAll(t, res.Body)
			res.Body.Close()
			inRequest, durable := 0, 0
			for _, l := range lines {
				if l.Type() != "settled" {
					continue
				}
				if l.Value["path"] == "durable" {
					durable++
				} else {
					inRequest++
				}
			}
			wantIn, wantDurable := 5, 0
			if worker {
				wantIn, wantDurable = 2, 3
			}
			if inRequest != wantIn || durable != wantDurable {
				t.Errorf("%d settled in the request, %d durable; want %d and %d", inRequest, durable, wantIn, wantDurable)
			}
			if worker {
				testrig.Work(t, a.Engine, 1, 10*time.Millisecond)
			}
			for _, out := range runs {
				a.WaitStatus(t, out.RunID, runtime.StatusCompleted, 20*time.Second)
			}
			if n := a.Count(t, `SELECT COUNT(*) FROM demo_refunds`); n != 5 {
				t.Errorf("%d refunds, want 5", n)
			}
		})
	}
}

// A bulk stream keeps alive through a silent tool, and the client leaving
// stops none of its continuations.
func TestBulkStreamKeepaliveAndClientGone(t *testing.T) {
	a := newApp(t, 100*time.Millisecond)
	x, xo := a.Waiting(t, "silent")
	y, yo := a.Waiting(t, "silent")
	c := a.signIn(t, "approver")
	form := url.Values{"decision": {"approve"}, "run": {bulkField(x, x.Digest), bulkField(y, y.Digest)}}

	res, err := c.http.Do(c.postRequest("/inbox/decisions", form, "application/x-ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	st := testrig.Read(t, res.Body, time.Now())
	first, err := st.Line(0, 10*time.Second)
	if err != nil || first.Type() != "claimed" {
		t.Fatalf("first line %v, %v; want claimed", first, err)
	}
	for i := 1; ; i++ {
		l, err := st.Line(i, 10*time.Second)
		if err != nil {
			t.Fatalf("no keepalive before the stream ended: %v", err)
		}
		if l.Type() == "keepalive" {
			if len(l.Value) != 1 {
				t.Errorf("keepalive %s says more than its type", l.Raw)
			}
			break
		}
	}
	st.Close() // the client goes away mid-continuation
	for _, out := range []runtime.Outcome{x, y} {
		a.WaitStatus(t, out.RunID, runtime.StatusCompleted, 20*time.Second)
	}
	if a.Refunds(t, xo) != 1 || a.Refunds(t, yo) != 1 {
		t.Errorf("refunds %d and %d, want 1 each", a.Refunds(t, xo), a.Refunds(t, yo))
	}
}
