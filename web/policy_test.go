package web_test

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/turnstile-dev/turnstile/runtime"
)

// ruledConfig asks two votes for big refunds and denies spam ones.
const ruledConfig = `
identifier: ruled
name: Ruled
provider:
  type: scripted
  script:
    rounds:
      - tool_calls:
          - {name: refund_order, arguments: {order_id: "${order_id}", amount_cents: 4000, reason: "big"}}
          - {name: refund_order, arguments: {order_id: "${order_id}", reason: "spam"}}
      - text: "done"
tools: [refund_order]
policy:
  - name: big-refunds
    when: has(args.amount_cents) && args.amount_cents > 3000
    then: {votes: 2}
  - name: no-spam
    when: args.reason == "spam"
    then: deny
    reason: spam is not refunded
`

// The card says which rule asked for votes, and offers only the call no
// rule decided; the run page and the history show the rule as who
// decided the other, with its reason; so does the event stream.
func TestRulesOnEverySurface(t *testing.T) {
	a := newAppWith(t, 0, appEngine{configs: []string{ruledConfig}})
	out := a.start(t, "ruled", "owner", runtime.OriginInteractive)
	if out.Status != runtime.StatusWaitingForApproval || len(out.Pending.Calls) != 1 || out.Pending.Calls[0].ID != "call_1_1" {
		t.Fatalf("outcome %s %+v, want call_1_1 waiting for a person", out.Status, out.Pending)
	}

	approver := a.as(t, "approver")
	_, body := approver.get("/inbox")
	card := html.UnescapeString(inboxCard(t, body, out.RunID))
	if !strings.Contains(card, `data-testid="rule">rule big-refunds: 2 approvals<`) {
		t.Errorf("the card does not say which rule asked for votes:\n%s", card)
	}
	if strings.Contains(card, "spam") {
		t.Errorf("the card offers the call the rule denied:\n%s", card)
	}

	owner := a.as(t, "owner")
	res, page := owner.get(runPath(out.RunID, ""))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET run page = %d", res.StatusCode)
	}
	page = html.UnescapeString(page)
	if !strings.Contains(page, "policy:no-spam") || !strings.Contains(page, "spam is not refunded") {
		t.Errorf("the run page does not show the rule's decision with its reason:\n%s", page)
	}
	_, history := owner.get("/runs")
	if !strings.Contains(html.UnescapeString(history), "denied by policy:no-spam: spam is not refunded") {
		t.Errorf("the history does not show the rule's decision:\n%s", history)
	}

	api := a.bearer(t, "owner", runtime.ScopeRunRead)
	var by []string
	for _, l := range api.call(t, a, http.MethodGet, runPathAPI(out.RunID, "/events"), "", nil).lines(t) {
		if l["kind"] == "approval" {
			p, _ := l["payload"].(map[string]any)
			by = append(by, p["by"].(string)+" "+p["decision"].(string))
		}
	}
	if strings.Join(by, ",") != "policy:no-spam deny" {
		t.Errorf("approval events %v, want one by policy:no-spam", by)
	}
	approvals := a.bearer(t, "approver", runtime.ScopeRunRead).call(t, a, http.MethodGet, "/api/approvals", "", nil).object(t)
	list, _ := approvals["approvals"].([]any)
	if len(list) != 1 {
		t.Fatalf("approvals = %v", approvals)
	}
	rules, _ := list[0].(map[string]any)["rules"].(map[string]any)
	if rules["call_1_1"] != "big-refunds" || len(rules) != 1 {
		t.Errorf("rules = %v, want call_1_1 asked by big-refunds", rules)
	}
}
