package templates

import (
	"os"
	"testing"
)

func TestDump(t *testing.T) {
	if os.Getenv("DUMP") == "" {
		t.Skip()
	}
	p := InboxPage{Page: samplePage(), Now: now, Runs: []InboxRun{{
		ID: 42, Configuration: "Refund agent", WaitingSince: now.Add(-190e9), Kind: "approval", Digest: "d", CanOpen: true, Note: "n",
		Calls: []Call{{ID: "c1", Name: "refund_order", Arguments: "{\n  \"order\": 17\n}"}}}, {
		ID: 5, Configuration: "Input agent", Kind: "input", Digest: "dig5", WaitingSince: now,
		Fields: []Field{
			{Name: "count", Label: "How many", Type: "integer", Required: true, Min: ptr(1), Value: "11", Error: "too big", Description: "d"},
			{Name: "urgent", Type: "boolean", Value: "true"},
			{Name: "color", Type: "string", Enum: []string{"red", "green"}},
		}}}}
	out, _ := render(t, Inbox(p))
	os.WriteFile(os.Getenv("DUMP")+"/inbox.html", []byte(out), 0o644)
	out, _ = render(t, RunDetail(RunPage{Page: samplePage(), Run: RunSummary{ID: 3, Status: "waiting_for_approval", Waiting: true, CanCancel: true, Prompt: "p"}, Events: []Event{{Seq: 1, Kind: "llm", Payload: "{}"}}}))
	os.WriteFile(os.Getenv("DUMP")+"/run.html", []byte(out), 0o644)
	out, _ = render(t, Login(LoginPage{Error: "bad", Username: "x"}))
	os.WriteFile(os.Getenv("DUMP")+"/login.html", []byte(out), 0o644)
	out, _ = render(t, Error(ErrorPage{Status: 404, Heading: "Not found", Message: "No such run."}))
	os.WriteFile(os.Getenv("DUMP")+"/error.html", []byte(out), 0o644)
}
