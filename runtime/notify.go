package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Delivery is one notification of one endpoint in the outbox: written in
// the commit of the step that causes it, then claimed and sent by the
// workers (runtime/outbox) until it is delivered or given up.
type Delivery struct {
	ID int64 `db:"id"`
	// WebhookID is the Standard Webhooks message id, the same on every
	// attempt: receivers de-duplicate on it.
	WebhookID       string `db:"webhook_id"`
	RunID           int64  `db:"run_id"`
	ConfigurationID int64  `db:"configuration_id"`
	Event           string `db:"event"`
	URL             string `db:"url"`
	// SecretEnv names the environment variable that holds the signing
	// secret; "" sends the notification unsigned (a Slack incoming webhook
	// has no secret: its URL is one).
	SecretEnv string `db:"secret_env"`
	Format    string `db:"format"`
	// Body is the JSON body as sent, sealed like run content when state
	// keys are set (at privacy level full it carries run content).
	Body []byte `db:"body"`
	// Attempts counts the attempts so far, the claimed one included.
	Attempts int `db:"attempts"`
	// Age is how long ago the notification was written, on the
	// database's clock, as of its claim.
	Age time.Duration `db:"-"`
}

// notice is what one notification says about a run, before it is shaped
// for each endpoint.
type notice struct {
	event string
	// status is the run's status as the commit leaves it: waiting, settled,
	// or running for an expiry (a worker carries it out).
	status Status
	// digest and turn describe the pending turn of a waiting, escalated
	// or expired run; timeout is the turn's deadline from now (0: none).
	digest  string
	turn    *PendingTurn
	timeout time.Duration
	// reason and answer are a settled run's termination reason and final
	// answer; action is what an expiry does (deny or escalate).
	reason, answer, action string
	// voter, votes and required are a vote's (run.voted): who, how many
	// votes the turn has with theirs, and how many it needs.
	voter           string
	votes, required int
}

// subscribed reports whether an endpoint wants an event: all of them when
// it names none.
func subscribed(n Notify, event string) bool {
	return len(n.Events) == 0 || slices.Contains(n.Events, event)
}

// notifications builds the outbox rows of one notice, one per endpoint of
// the configuration that subscribed to its event; none (and no work at
// all) for a configuration without endpoints, so a step of a run nobody
// listens to pays nothing. The bodies are sealed.
func (e *Engine) notifications(cfg *Configuration, runID int64, n notice) ([]Delivery, error) {
	if len(cfg.Notify) == 0 {
		return nil, nil
	}
	var out []Delivery
	var standard, slack []byte
	now := time.Now().UTC()
	for _, ep := range cfg.Notify {
		if !subscribed(ep, n.event) {
			continue
		}
		var body []byte
		var err error
		switch ep.Format {
		case NotifySlack:
			if slack == nil {
				slack, err = json.Marshal(map[string]string{"text": e.slackText(cfg, runID, n)})
			}
			body = slack
		default:
			if standard == nil {
				standard, err = json.Marshal(map[string]any{"type": n.event,
					"timestamp": now.Format(time.RFC3339), "data": e.noticeData(cfg, runID, n, now)})
			}
			body = standard
		}
		if err != nil {
			return nil, fmt.Errorf("runtime: notification body: %w", err)
		}
		id := webhookID()
		sealed, err := e.sealer.Seal(body, DeliveryPlace(runID, id))
		if err != nil {
			return nil, fmt.Errorf("runtime: seal notification: %w", err)
		}
		format := ep.Format
		if format == "" {
			format = NotifyStandard
		}
		out = append(out, Delivery{WebhookID: id, RunID: runID, ConfigurationID: cfg.ID,
			Event: n.event, URL: ep.URL, SecretEnv: ep.SecretEnv, Format: format, Body: sealed})
	}
	return out, nil
}

// webhookID is a new Standard Webhooks message id.
func webhookID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return "msg_" + hex.EncodeToString(b)
}

// noticeData is the body's data: ids, configuration, status,
// tool names, digest, deadline and the links; arguments and the answer
// only at privacy level full.
func (e *Engine) noticeData(cfg *Configuration, runID int64, n notice, now time.Time) map[string]any {
	d := map[string]any{"run_id": runID, "configuration": cfg.Identifier, "status": string(n.status),
		"run_url": e.publicURL + fmt.Sprintf("/runs/%d", runID)}
	full := cfg.PrivacyLevel == PrivacyFull
	if n.turn != nil {
		d["turn_digest"] = n.digest
		d["tool_names"] = n.turn.ToolNames()
		if n.turn.Escalated != "" {
			d["escalate_grant"] = n.turn.Escalated
		}
		if full {
			calls := make([]map[string]any, len(n.turn.Calls))
			for i, c := range n.turn.Calls {
				calls[i] = map[string]any{"id": c.ID, "name": c.Name, "arguments": c.Arguments}
			}
			d["calls"] = calls
		}
	}
	switch n.event {
	case EventRunWaiting, EventRunEscalated:
		d["decide_url"] = e.decideURL(runID)
		// The row's deadline is NOW(6) of the database plus the timeout;
		// this is the same instant on this process's clock.
		d["decision_deadline"] = nil
		if n.timeout > 0 {
			d["decision_deadline"] = now.Add(n.timeout).Format(time.RFC3339)
		}
	case EventRunExpired:
		d["on_timeout"] = n.action
	case EventRunVoted:
		d["decide_url"] = e.decideURL(runID)
		d["voter"], d["votes"], d["approvals_required"] = n.voter, n.votes, n.required
	case EventRunSettled:
		d["termination_reason"] = n.reason
		if full {
			d["answer"] = n.answer
		}
	}
	return d
}

// decideURL is the page a decider opens from a notification.
func (e *Engine) decideURL(runID int64) string {
	return e.publicURL + fmt.Sprintf("/inbox/runs/%d", runID)
}

// slackText is the text of a Slack incoming-webhook body: what happened,
// in a line, and the link (Slack's <url|label>). It names tools, never
// arguments.
func (e *Engine) slackText(cfg *Configuration, runID int64, n notice) string {
	run := fmt.Sprintf("Run %d of %s", runID, cfg.Identifier)
	tools := ""
	if n.turn != nil {
		tools = strings.Join(n.turn.ToolNames(), ", ")
	}
	switch n.event {
	case EventRunWaiting:
		what := "an approval of " + tools
		if n.status == StatusWaitingForInput {
			what = "input for " + tools
		}
		return fmt.Sprintf("%s waits for %s: <%s|decide>", run, what, e.decideURL(runID))
	case EventRunEscalated:
		return fmt.Sprintf("%s was escalated to holders of the %q grant (%s): <%s|decide>",
			run, n.turn.Escalated, tools, e.decideURL(runID))
	case EventRunVoted:
		return fmt.Sprintf("%s: %s approved %s, %d of %d approvals: <%s|decide>",
			run, n.voter, tools, n.votes, n.required, e.decideURL(runID))
	case EventRunExpired:
		return fmt.Sprintf("%s: nobody decided in time (%s); on timeout: %s. <%s/runs/%d|open>",
			run, tools, n.action, e.publicURL, runID)
	default:
		return fmt.Sprintf("%s %s (%s). <%s/runs/%d|open>", run, n.status, n.reason, e.publicURL, runID)
	}
}

// settledNotifications are the notifications of an idle run's cancel: its
// run.settled, as cancelled for the reason given (a person's cancel, or
// the deletion of its owner).
func (e *Engine) settledNotifications(ctx context.Context, run *Run, reason string) ([]Delivery, error) {
	cfg, err := e.store.Configuration(ctx, run.ConfigurationID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil // nobody left to tell
	}
	if err != nil {
		return nil, err
	}
	return e.notifications(cfg, run.ID, notice{event: EventRunSettled, status: StatusCancelled, reason: reason})
}
