package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// refusal is one refused inbox request: who sends what about which run,
// and what the inbox answers.
type refusal struct {
	name string
	user string
	// setup readies a run and returns it with the request to send; the
	// client is the one that sends it, for setups that decide first.
	setup func(t *testing.T, c *client) (id int64, path string, form url.Values)
	// wantFlash is the flash of a 303 to /inbox, with %d for the run id.
	wantFlash string
	// flashPattern, instead, is a regular expression the flash matches
	// (with %d for the run id), for a flash that names a time.
	flashPattern string
	// want422Field names the field a 422 marks; want422Values are values
	// the re-rendered form must keep.
	want422Field  string
	want422Values []string
	want404       bool
}

// TestInboxRefusals provokes every refusal of the pipeline through the inbox
// and checks its answer, the flash the user reads next, and that nothing
// was written.
func TestInboxRefusals(t *testing.T) {
	a := newApp(t, 0)
	ctx := context.Background()
	waiting := func(cfg string) runtime.Outcome {
		return a.start(t, cfg, "owner", runtime.OriginInteractive)
	}
	// decideFirst decides a run through the inbox, and reads the flash
	// away, so the refused request is the second.
	decideFirst := func(t *testing.T, c *client, path string, form url.Values) {
		t.Helper()
		res, _ := c.post(path, form)
		wantRedirect(t, res, "/inbox")
		c.flashText()
	}
	staleFlash := "The pending action of run %d changed; review it again."

	cases := []refusal{
		{name: "not_waiting: a settled run", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("refund")
				if _, err := a.Engine.Cancel(ctx, o.RunID, a.Users["owner"].Actor()); err != nil {
					t.Fatal(err)
				}
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			wantFlash: "Run %d no longer waits for this decision."},
		{name: "not_waiting: approval of an input turn", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("input")
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			wantFlash: "Run %d no longer waits for this decision."},
		{name: "not_waiting: input for an approval turn", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("refund")
				return o.RunID, inboxPath(o.RunID, "input"), answerForm(o.Digest)
			},
			wantFlash: "Run %d no longer waits for this decision."},
		{name: "a stranger's decision: as for no run", user: "other",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("refund")
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			want404: true},
		{name: "a stranger's input that would not validate either: as for no run", user: "other",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("input")
				return o.RunID, inboxPath(o.RunID, "input"), url.Values{"turn_digest": {o.Digest}, "amount": {"abc"}}
			},
			want404: true},
		{name: "process_run", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := a.start(t, "refund", "owner", runtime.OriginProcess)
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			wantFlash: "Run %d is decided by the process that started it, not in the inbox."},
		{name: "process_run: even for its owner", user: "owner",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := a.start(t, "refund", "owner", runtime.OriginProcess)
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			wantFlash: "Run %d is decided by the process that started it, not in the inbox."},
		{name: "inactive_configuration", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("switched-off")
				if err := a.Store.SetConfigurationActive(ctx, a.Run(t, o.RunID).ConfigurationID, false); err != nil {
					t.Fatal(err)
				}
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			wantFlash: "The agent of run %d is switched off; it cannot continue."},
		{name: "four_eyes: the owner approves", user: "owner",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("four-eyes")
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			wantFlash: "Someone else has to approve run %d; you may deny it."},
		{name: "unreadable_state", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("refund")
				if _, err := a.DB.Exec(`UPDATE runs SET state = 'not json' WHERE id = ?`, o.RunID); err != nil {
					t.Fatal(err)
				}
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			wantFlash: "The saved state of run %d cannot be read; ask an admin."},
		{name: "approver_not_permitted", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("granted")
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			wantFlash: `You may not decide run %d: approving refund_order takes the "refunds" grant.`},
		{name: "invalid_input: below the minimum", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("input")
				return o.RunID, inboxPath(o.RunID, "input"), url.Values{"turn_digest": {o.Digest}, "amount": {"0"}, "note": {"keep <this> note"}}
			},
			want422Field: "amount", want422Values: []string{`value="0"`, `value="keep &lt;this&gt; note"`}},
		{name: "invalid_input: not a number", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("input")
				return o.RunID, inboxPath(o.RunID, "input"), url.Values{"turn_digest": {o.Digest}, "amount": {"twelve"}, "note": {"kept"}}
			},
			want422Field: "amount", want422Values: []string{`value="twelve"`, `value="kept"`}},
		{name: "invalid_input: a required field left empty", user: "owner",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("input")
				return o.RunID, inboxPath(o.RunID, "input"), url.Values{"turn_digest": {o.Digest}, "amount": {""}, "note": {"kept too"}}
			},
			want422Field: "amount", want422Values: []string{`value="kept too"`}},
		{name: "stale_turn: tampered digest", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("refund")
				return o.RunID, inboxPath(o.RunID, "decision"), approve(strings.Repeat("0", 64))
			},
			wantFlash: staleFlash},
		{name: "stale_turn: missing digest", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("refund")
				f := approve(o.Digest)
				f.Del("turn_digest")
				return o.RunID, inboxPath(o.RunID, "decision"), f
			},
			wantFlash: staleFlash},
		{name: "stale_turn: a digest from an earlier turn", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("twice")
				decideFirst(t, c, inboxPath(o.RunID, "decision"), approve(o.Digest))
				if r := a.Run(t, o.RunID); !r.Status.Waiting() || r.TurnDigest == o.Digest {
					t.Fatalf("after the first approval run %d is %s with digest %s, want a new turn", o.RunID, r.Status, r.TurnDigest)
				}
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			wantFlash: staleFlash},
		{name: "stale_turn: input with a tampered digest", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("input")
				return o.RunID, inboxPath(o.RunID, "input"), answerForm("tampered")
			},
			wantFlash: staleFlash},
		{name: "already_resuming: the same approval twice", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("refund")
				decideFirst(t, c, inboxPath(o.RunID, "decision"), approve(o.Digest))
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			flashPattern: `^Run %d was already approved by approver at \d\d:\d\d:\d\d UTC; it is completed\.$`},
		{name: "already_resuming: the same answer twice", user: "owner",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("input")
				decideFirst(t, c, inboxPath(o.RunID, "input"), answerForm(o.Digest))
				return o.RunID, inboxPath(o.RunID, "input"), answerForm(o.Digest)
			},
			flashPattern: `^Run %d was already answered by owner at \d\d:\d\d:\d\d UTC; it is completed\.$`},
		{name: "already_resuming: while another holds the run", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("refund")
				// Someone else won the claim; their continuation has not run yet.
				if _, err := a.Engine.Decide(ctx, runtime.DecideRequest{RunID: o.RunID, Digest: o.Digest,
					Decision: runtime.DecisionApprove, Actor: a.Users["admin"].Actor(), Path: runtime.PathRequest}); err != nil {
					t.Fatal(err)
				}
				return o.RunID, inboxPath(o.RunID, "decision"), approve(o.Digest)
			},
			flashPattern: `^Run %d was already approved by admin at \d\d:\d\d:\d\d UTC; it is running\.$`},
		{name: "invalid_request: unknown decision", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("refund")
				f := approve(o.Digest)
				f.Set("decision", "maybe")
				return o.RunID, inboxPath(o.RunID, "decision"), f
			},
			wantFlash: "Run %d: decision must be approve or deny."},
		{name: "invalid_request: unknown scope", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("refund")
				f := approve(o.Digest)
				f.Set("scope", "forever")
				return o.RunID, inboxPath(o.RunID, "decision"), f
			},
			wantFlash: "Run %d: scope must be once or session."},
		{name: "invalid_request: reason too long", user: "approver",
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("refund")
				f := approve(o.Digest)
				f.Set("reason", strings.Repeat("é", 2001))
				return o.RunID, inboxPath(o.RunID, "decision"), f
			},
			wantFlash: "Run %d: the reason must be valid text of at most 2000 characters."},
	}
	// Ids that name no run answer a 404 page; the run whose digest they
	// carry must stay as it was.
	for _, p := range []struct{ name, path string }{
		{"unknown run id: decision", "/inbox/runs/999999/decision"},
		{"unknown run id: input", "/inbox/runs/999999/input"},
		{"malformed id: letters", "/inbox/runs/abc/decision"},
		{"malformed id: zero", "/inbox/runs/0/decision"},
		{"malformed id: negative", "/inbox/runs/-1/input"},
		{"malformed id: fraction", "/inbox/runs/1.5/decision"},
		{"malformed id: beyond int64", "/inbox/runs/99999999999999999999/input"},
	} {
		cases = append(cases, refusal{name: p.name, user: "admin", want404: true,
			setup: func(t *testing.T, c *client) (int64, string, url.Values) {
				o := waiting("input")
				f := answerForm(o.Digest)
				f.Set("decision", "approve")
				return o.RunID, p.path, f
			}})
	}

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := a.signIn(t, tc.user)
			id, path, form := tc.setup(t, c)
			before := a.State(t, id)
			res, body := c.post(path, form)
			a.Unchanged(t, id, before)
			switch {
			case tc.want404:
				wantErrorPage(t, res, body, http.StatusNotFound, "Not found")
				if got := c.flashText(); got != "" {
					t.Errorf("flash after the 404 = %q, want none", got)
				}
			case tc.want422Field != "":
				want422(t, res, body, id, tc.want422Field, tc.want422Values)
				if got := c.flashText(); got != "" {
					t.Errorf("flash after the 422 = %q, want none", got)
				}
			case tc.flashPattern != "":
				wantRedirect(t, res, "/inbox")
				if got, want := c.flashText(), fmt.Sprintf(tc.flashPattern, id); !regexp.MustCompile(want).MatchString(got) {
					t.Errorf("flash = %q, want one matching %q", got, want)
				}
			default:
				wantRedirect(t, res, "/inbox")
				if got, want := c.flashText(), fmt.Sprintf(tc.wantFlash, id); got != want {
					t.Errorf("flash = %q, want %q", got, want)
				}
			}
		})
	}
}

// want422 checks the inbox re-rendered for a refused input form: 422, the
// form of the run with the user's values, and a message for the field.
func want422(t *testing.T, res *http.Response, body string, id int64, field string, values []string) {
	t.Helper()
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("status = %d, want 422", res.StatusCode)
	}
	if got := res.Header.Get("Content-Type"); !strings.HasPrefix(got, "text/html") {
		t.Errorf("Content-Type = %q, want the inbox page", got)
	}
	if loc := res.Header.Get("Location"); loc != "" {
		t.Errorf("Location = %q, want none", loc)
	}
	form := inboxCard(t, body, id)
	if want := fmt.Sprintf(`data-testid="field-error" data-field="%s"`, field); !strings.Contains(form, want) {
		t.Errorf("run %d's form has no %s:\n%s", id, want, form)
	}
	if !strings.Contains(form, `data-testid="form-error"`) {
		t.Errorf("run %d's form has no form-error", id)
	}
	for _, v := range values {
		if !strings.Contains(form, v) {
			t.Errorf("run %d's form lost the user's %s:\n%s", id, v, form)
		}
	}
}

// TestFourEyesOwnerMayDeny: under four-eyes the initiator sees no Approve
// button and may still deny; another person approves.
func TestFourEyesOwnerMayDeny(t *testing.T) {
	a := newApp(t, 0)
	denied, deniedOrder := a.Waiting(t, "four-eyes")
	owner := a.signIn(t, "owner")
	_, body := owner.get("/inbox")
	if card := inboxCard(t, body, denied.RunID); !strings.Contains(card, `data-testid="four-eyes"`) || strings.Contains(card, `value="approve"`) {
		t.Errorf("the owner's card of a four-eyes run: want the four-eyes note and no Approve button:\n%s", card)
	}
	form := approve(denied.Digest)
	form.Set("decision", "deny")
	res, _ := owner.post(inboxPath(denied.RunID, "decision"), form)
	wantRedirect(t, res, "/inbox")
	if got, want := owner.flashText(), fmt.Sprintf("You denied refund_order; run %d completed: the agent finished.", denied.RunID); got != want {
		t.Errorf("flash after the owner's denial = %q, want %q", got, want)
	}
	if got := a.Refunds(t, deniedOrder); got != 0 {
		t.Errorf("refunds after a denial = %d, want 0", got)
	}

	approved, order := a.Waiting(t, "four-eyes")
	approver := a.signIn(t, "approver")
	res, _ = approver.post(inboxPath(approved.RunID, "decision"), approve(approved.Digest))
	wantRedirect(t, res, "/inbox")
	if got, want := approver.flashText(), fmt.Sprintf("You approved refund_order; run %d completed: the agent finished.", approved.RunID); got != want {
		t.Errorf("flash after a second person's approval = %q, want %q", got, want)
	}
	if got := a.Refunds(t, order); got != 1 {
		t.Errorf("refunds after a second person's approval = %d, want 1", got)
	}
}

// TestGrantedToolNeedsTheGrant: an approver without the tool's grant may
// deny the turn; an admin, who holds every grant, may approve it.
func TestGrantedToolNeedsTheGrant(t *testing.T) {
	a := newApp(t, 0)
	tests := []struct {
		user, decision string
		wantRefunds    int
	}{
		{"approver", "deny", 0},
		{"admin", "approve", 1},
	}
	for _, tt := range tests {
		t.Run(tt.user+" "+tt.decision, func(t *testing.T) {
			paused, order := a.Waiting(t, "granted")
			c := a.signIn(t, tt.user)
			form := approve(paused.Digest)
			form.Set("decision", tt.decision)
			res, _ := c.post(inboxPath(paused.RunID, "decision"), form)
			wantRedirect(t, res, "/inbox")
			if got, want := c.flashText(), fmt.Sprintf("You %s refund_order; run %d completed: the agent finished.", map[string]string{"approve": "approved", "deny": "denied"}[tt.decision], paused.RunID); got != want {
				t.Errorf("flash = %q, want %q", got, want)
			}
			if got := a.Refunds(t, order); got != tt.wantRefunds {
				t.Errorf("refunds = %d, want %d", got, tt.wantRefunds)
			}
		})
	}
}
