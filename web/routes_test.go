package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// TestInboxByRole: approvers and admins see every interactive waiting run,
// owners their own, anyone else nothing; process runs and settled runs are
// nobody's inbox.
func TestInboxByRole(t *testing.T) {
	a := newApp(t, 0)
	refund := a.start(t, "refund", "owner", runtime.OriginInteractive)
	input := a.start(t, "input", "owner", runtime.OriginInteractive)
	admins := a.start(t, "refund", "admin", runtime.OriginInteractive)
	process := a.start(t, "refund", "owner", runtime.OriginProcess)
	settled := a.start(t, "refund", "owner", runtime.OriginInteractive)
	if _, err := a.Engine.Cancel(context.Background(), settled.RunID, a.Users["owner"].Actor()); err != nil {
		t.Fatal(err)
	}
	everyone := []int64{refund.RunID, input.RunID, admins.RunID}

	tests := []struct {
		role     string
		wantRuns []int64 // nil: sent to sign in
	}{
		{"admin", everyone},
		{"approver", everyone},
		{"owner", []int64{refund.RunID, input.RunID}},
		{"other", []int64{}},
		{"", nil},
	}
	for _, tt := range tests {
		t.Run(roleName(tt.role), func(t *testing.T) {
			c := a.as(t, tt.role)
			res, body := c.get("/inbox")
			if tt.wantRuns == nil {
				wantRedirect(t, res, "/login")
				return
			}
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200", res.StatusCode)
			}
			if got := inboxRuns(t, body); !slices.Equal(got, tt.wantRuns) {
				t.Errorf("inbox lists runs %v, want %v (process run %d and settled run %d never)",
					got, tt.wantRuns, process.RunID, settled.RunID)
			}
			if empty := strings.Contains(body, `data-testid="inbox-empty"`); empty != (len(tt.wantRuns) == 0) {
				t.Errorf("inbox-empty shown = %v with %d runs", empty, len(tt.wantRuns))
			}
		})
	}
}

// TestRunPageByRole: a run's page opens for its owner and admins; for
// anyone else, and for ids that name no run, it is the same 404 page.
func TestRunPageByRole(t *testing.T) {
	a := newApp(t, 0)
	paused := a.start(t, "refund", "owner", runtime.OriginInteractive)
	id := paused.RunID
	prompt := a.Run(t, id).Prompt
	events := len(a.Events(t, id))
	if events == 0 {
		t.Fatalf("run %d has no events to show", id)
	}

	tests := []struct {
		name       string
		role       string
		path       string
		wantStatus int // 200, 404 or 303 (to /login)
	}{
		{"admin", "admin", runPath(id, ""), http.StatusOK},
		{"owner", "owner", runPath(id, ""), http.StatusOK},
		{"approver", "approver", runPath(id, ""), http.StatusNotFound},
		{"other", "other", runPath(id, ""), http.StatusNotFound},
		{"signed out", "", runPath(id, ""), http.StatusSeeOther},
		{"signed out, malformed id", "", "/runs/abc", http.StatusSeeOther},
		{"malformed id", "owner", "/runs/abc", http.StatusNotFound},
		{"zero id", "admin", "/runs/0", http.StatusNotFound},
		{"negative id", "admin", "/runs/-1", http.StatusNotFound},
		{"id beyond int64", "admin", "/runs/99999999999999999999", http.StatusNotFound},
		{"unknown id, admin", "admin", "/runs/999999", http.StatusNotFound},
		{"unknown id, owner", "owner", "/runs/999999", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := a.as(t, tt.role)
			res, body := c.get(tt.path)
			switch tt.wantStatus {
			case http.StatusSeeOther:
				wantRedirect(t, res, "/login")
			case http.StatusNotFound:
				wantErrorPage(t, res, body, http.StatusNotFound, "Not found")
				if strings.Contains(body, prompt) || strings.Contains(body, "MARKER") {
					t.Errorf("the 404 page shows the run's content:\n%s", body)
				}
			case http.StatusOK:
				if res.StatusCode != http.StatusOK {
					t.Fatalf("status = %d, want 200", res.StatusCode)
				}
				if want := fmt.Sprintf(`data-testid="run-summary" data-run-id="%d"`, id); !strings.Contains(body, want) {
					t.Errorf("body has no %s", want)
				}
				if got := len(eventItem.FindAllString(body, -1)); got != events {
					t.Errorf("%d events on the page, want the %d stored", got, events)
				}
			}
		})
	}
}

// TestCancelByRole: owners and admins cancel and are sent back to the run;
// to anyone else the run does not exist, and nothing changes.
func TestCancelByRole(t *testing.T) {
	a := newApp(t, 0)
	tests := []struct {
		role        string
		wantCancel  bool
		wantLogin   bool
		wantNotSeen bool
	}{
		{role: "admin", wantCancel: true},
		{role: "owner", wantCancel: true},
		{role: "approver", wantNotSeen: true},
		{role: "other", wantNotSeen: true},
		{role: "", wantLogin: true},
	}
	for _, tt := range tests {
		t.Run(roleName(tt.role), func(t *testing.T) {
			paused, _ := a.Waiting(t, "refund")
			id := paused.RunID
			c := a.as(t, tt.role)
			before := a.State(t, id)
			res, body := c.post(runPath(id, "/cancel"), url.Values{})
			switch {
			case tt.wantCancel:
				wantRedirect(t, res, runPath(id, ""))
				if got := a.Run(t, id).Status; got != runtime.StatusCancelled {
					t.Errorf("status = %s, want cancelled", got)
				}
				if got, want := c.flashText(), fmt.Sprintf("Run %d was cancelled.", id); got != want {
					t.Errorf("flash = %q, want %q", got, want)
				}
			case tt.wantNotSeen:
				wantErrorPage(t, res, body, http.StatusNotFound, "Not found")
				a.Unchanged(t, id, before)
			case tt.wantLogin:
				wantRedirect(t, res, "/login")
				a.Unchanged(t, id, before)
			}
		})
	}

	t.Run("a settled run", func(t *testing.T) {
		paused, _ := a.Waiting(t, "refund")
		id := paused.RunID
		c := a.signIn(t, "owner")
		c.post(runPath(id, "/cancel"), url.Values{})
		c.flashText()
		before := a.State(t, id)
		res, _ := c.post(runPath(id, "/cancel"), url.Values{})
		wantRedirect(t, res, runPath(id, ""))
		if got := c.flashText(); !strings.Contains(got, "already cancelled") {
			t.Errorf("flash = %q, want it to say the run is already cancelled", got)
		}
		a.Unchanged(t, id, before)
	})
	for _, path := range []string{"/runs/999999/cancel", "/runs/abc/cancel", "/runs/0/cancel"} {
		t.Run(path, func(t *testing.T) {
			c := a.signIn(t, "admin")
			res, body := c.post(path, url.Values{})
			wantErrorPage(t, res, body, http.StatusNotFound, "Not found")
		})
	}
}

// TestDecideByRole: admins, approvers and the owner may decide a run from
// the inbox; anyone else is refused with a flash, and a visitor is sent to
// sign in. Both forms, approval and input.
func TestDecideByRole(t *testing.T) {
	a := newApp(t, 0)
	forms := []struct {
		action string
		cfg    string
		form   func(digest string) url.Values
	}{
		{"decision", "refund", approve},
		{"input", "input", answerForm},
	}
	tests := []struct {
		role      string
		wantDone  bool
		wantLogin bool
	}{
		{role: "admin", wantDone: true},
		{role: "approver", wantDone: true},
		{role: "owner", wantDone: true},
		{role: "other"},
		{role: "", wantLogin: true},
	}
	for _, f := range forms {
		for _, tt := range tests {
			t.Run(f.action+"/"+roleName(tt.role), func(t *testing.T) {
				paused, order := a.Waiting(t, f.cfg)
				id := paused.RunID
				c := a.as(t, tt.role)
				before := a.State(t, id)
				res, _ := c.post(inboxPath(id, f.action), f.form(paused.Digest))
				switch {
				case tt.wantLogin:
					wantRedirect(t, res, "/login")
					a.Unchanged(t, id, before)
					return
				case tt.wantDone:
					wantRedirect(t, res, "/inbox")
					did := "approved refund_order"
					if f.action == "input" {
						did = "answered ask_operator"
					}
					if got, want := c.flashText(), fmt.Sprintf("You %s; run %d completed: the agent finished.", did, id); got != want {
						t.Errorf("flash = %q, want %q", got, want)
					}
					if got := a.Run(t, id).Status; got != runtime.StatusCompleted {
						t.Errorf("status = %s, want completed", got)
					}
					wantRefunds := 0
					if f.action == "decision" {
						wantRefunds = 1
					}
					if got := a.Refunds(t, order); got != wantRefunds {
						t.Errorf("refunds = %d, want %d", got, wantRefunds)
					}
				default:
					// To whoever may not decide it, the run does not exist.
					if res.StatusCode != http.StatusNotFound {
						t.Errorf("answer = %d, want 404", res.StatusCode)
					}
					a.Unchanged(t, id, before)
				}
			})
		}
	}
}

// TestSignInAndOut: the sign-in page sends a signed-in user on to the
// inbox, and signing out ends the session for good, not just in the
// browser that asked.
func TestSignInAndOut(t *testing.T) {
	a := newApp(t, 0)

	t.Run("sign-in page for a visitor", func(t *testing.T) {
		res, body := a.visitor(t).get("/login")
		if res.StatusCode != http.StatusOK || !strings.Contains(body, `name="csrf_token"`) || !strings.Contains(body, `name="password"`) {
			t.Errorf("GET /login = %d, want 200 with the sign-in form:\n%s", res.StatusCode, body)
		}
	})
	t.Run("sign-in page when signed in", func(t *testing.T) {
		res, _ := a.signIn(t, "owner").get("/login")
		wantRedirect(t, res, "/inbox")
	})
	t.Run("sign out", func(t *testing.T) {
		c := a.signIn(t, "owner")
		old := c.sessionCookie(t)
		res, _ := c.post("/logout", url.Values{})
		wantRedirect(t, res, "/login")
		res, _ = c.get("/inbox")
		wantRedirect(t, res, "/login")

		// The old cookie, sent again by hand, opens nothing either.
		replay := a.visitor(t)
		req, err := http.NewRequest(http.MethodGet, replay.base+"/inbox", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.AddCookie(&http.Cookie{Name: old.Name, Value: old.Value})
		res, _ = replay.do(req)
		wantRedirect(t, res, "/login")
	})
	t.Run("a session token planted before sign-in is not the one after", func(t *testing.T) {
		planted := a.signIn(t, "other").sessionCookie(t)
		c := a.visitor(t)
		c.get("/login")
		u, _ := url.Parse(c.base)
		c.http.Jar.SetCookies(u, []*http.Cookie{{Name: planted.Name, Value: planted.Value, Path: "/"}})
		res, _ := c.post("/login", url.Values{"username": {"owner"}, "password": {testPassword}})
		wantRedirect(t, res, "/inbox")
		if after := c.sessionCookie(t).Value; after == planted.Value {
			t.Errorf("the session token stayed %q across sign-in", after)
		}
		if _, body := c.get("/inbox"); !strings.Contains(body, `data-testid="user-name">owner<`) {
			t.Errorf("after sign-in the inbox is not owner's")
		}
	})
}

// TestSignedOutRequestsStoreNoSession: nobody gets a session row for
// looking: the sign-in page, an error page, a redirect to sign in and a
// failed sign-in store none; a successful one stores exactly one.
func TestSignedOutRequestsStoreNoSession(t *testing.T) {
	a := newApp(t, 0)
	count := func() int {
		t.Helper()
		var n int
		if err := a.DB.Get(&n, `SELECT COUNT(*) FROM sessions`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	c := a.visitor(t)
	for _, path := range []string{"/login", "/nowhere", "/inbox", "/runs/1", "/static/nothing.css", "/login"} {
		c.get(path)
	}
	res, _ := c.post("/login", url.Values{"username": {"owner"}, "password": {"wrong"}})
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password = %d, want 401", res.StatusCode)
	}
	c.post("/login", url.Values{"username": {"nobody"}, "password": {"wrong"}})
	c.post("/logout", url.Values{})
	c.post(inboxPath(1, "decision"), url.Values{"decision": {"approve"}})
	if n := count(); n != 0 {
		t.Fatalf("%d session rows after signed-out requests, want 0", n)
	}
	res, _ = c.post("/login", url.Values{"username": {"owner"}, "password": {testPassword}})
	wantRedirect(t, res, "/inbox")
	if n := count(); n != 1 {
		t.Errorf("%d session rows after one sign-in, want 1", n)
	}
}

// itoa is for building paths in table cases.
func itoa(id int64) string { return strconv.FormatInt(id, 10) }
