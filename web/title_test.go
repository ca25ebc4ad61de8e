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

// TestTitles: a run's title is cut from its prompt, shown to who may read
// the run on its inbox card, in the history, on its page and in its JSON,
// and set by PATCH with every rule checked and nothing written on a
// refusal; with state keys set it is stored sealed.
func TestTitles(t *testing.T) {
	keys, err := seal.Parse("A:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xA1}, 32)))
	if err != nil {
		t.Fatal(err)
	}
	a := newAppWith(t, 0, appEngine{sealer: keys})
	paused := a.start(t, "refund", "owner", runtime.OriginInteractive)
	prompt := a.promptOf(t, paused.RunID)
	want := runtime.CutTitle(prompt)
	if want == "" || strings.Contains(want, "\n") {
		t.Fatalf("cut title %q of %q", want, prompt)
	}
	owner := a.signIn(t, "owner")
	for _, path := range []string{"/inbox", "/runs", runPath(paused.RunID, "")} {
		if _, page := owner.get(path); !strings.Contains(page, `data-testid="run-title">`+want+`<`) {
			t.Errorf("%s does not show the title %q to the owner", path, want)
		}
	}
	if _, page := a.signIn(t, "approver").get("/inbox"); strings.Contains(page, `data-testid="run-title"`) {
		t.Error("the inbox shows the title to an approver, who may not read the run")
	}
	api := a.bearer(t, "owner", "run:start", "run:read")
	run := api.call(t, a, http.MethodGet, runPathAPI(paused.RunID, ""), "", nil).wantKeys(t, http.StatusOK, "run")["run"].(map[string]any)
	if run["title"] != want {
		t.Errorf("run JSON title = %v, want %q", run["title"], want)
	}

	before := a.State(t, paused.RunID)
	for name, tc := range map[string]struct {
		who    caller
		body   string
		status int
		code   string
	}{
		"empty":            {api, `{"title":"  "}`, http.StatusBadRequest, "invalid_request"},
		"too long":         {api, `{"title":"` + strings.Repeat("é", 121) + `"}`, http.StatusBadRequest, "invalid_request"},
		"a control char":   {api, `{"title":"a\u0007b"}`, http.StatusBadRequest, "invalid_request"},
		"a line break":     {api, `{"title":"a\nb"}`, http.StatusBadRequest, "invalid_request"},
		"no title":         {api, `{}`, http.StatusBadRequest, "invalid_request"},
		"an unknown field": {api, `{"title":"x","name":"y"}`, http.StatusBadRequest, "invalid_request"},
		"a stranger":       {a.bearer(t, "other", "run:start"), `{"title":"mine"}`, http.StatusNotFound, "not_found"},
		"an approver":      {a.bearer(t, "approver", "run:start"), `{"title":"mine"}`, http.StatusNotFound, "not_found"},
		"no run:start":     {a.bearer(t, "owner", "run:read"), `{"title":"mine"}`, http.StatusForbidden, "insufficient_scope"},
	} {
		t.Run(name, func(t *testing.T) {
			tc.who.call(t, a, http.MethodPatch, runPathAPI(paused.RunID, ""), tc.body, nil).wantError(t, tc.status, tc.code)
		})
	}
	a.Unchanged(t, paused.RunID, before)

	const set = "Ada’s refund, checked twice"
	got := api.call(t, a, http.MethodPatch, runPathAPI(paused.RunID, ""), `{"title":" `+set+` "}`, nil).wantKeys(t, http.StatusOK, "run")
	if got["run"].(map[string]any)["title"] != set {
		t.Errorf("PATCH answered %v, want the title %q", got["run"], set)
	}
	if n := a.Count(t, `SELECT COUNT(*) FROM runs WHERE id = ? AND (INSTR(title, ?) > 0 OR INSTR(title, ?) > 0)`, paused.RunID, set, want); n != 0 {
		t.Error("the title is stored in plain text with state keys set")
	}
	if _, page := owner.get(runPath(paused.RunID, "")); !strings.Contains(page, "Ada’s refund, checked twice") {
		t.Error("the run page does not show the title the owner set")
	}
}
