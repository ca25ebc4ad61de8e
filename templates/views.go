// Package templates holds Turnstile's templ components: the layout, shared
// components (flash, error page, forms) and one page per screen, each fed a
// view-model struct shaped for display. It imports nothing of the engine.
package templates

import "time"

// Page is what the layout needs on every screen.
type Page struct {
	Title string
	// User is the signed-in user; nil on the login and error pages of a
	// visitor.
	User *User
	// CSRF is the token every form carries in its hidden csrf_token field.
	CSRF  string
	Flash string
	// Refresh, when positive, reloads the page after that many seconds.
	Refresh int
	// FeedCursor, when set, is where the page's script attaches the
	// person's feed (GET /api/feed) from, taken before the page read what
	// it shows.
	FeedCursor string
}

// User is the signed-in user as the layout shows them.
type User struct {
	Name  string
	Admin bool
}

// LoginPage is the sign-in form.
type LoginPage struct {
	Page
	Username string
	// Error is one generic message: it never says whether the user exists.
	Error string
}

// ErrorPage is every non-2xx page: 403, 404, 405, 413, 500, 503.
type ErrorPage struct {
	Page
	Status  int
	Heading string
	Message string
}

// InboxPage lists one page of what the user may decide, oldest first.
type InboxPage struct {
	Page
	Runs []InboxRun
	// Total is how many runs wait that the user may decide, with the
	// filters, on every page.
	Total int
	// Next is the address of the next page; "" on the last.
	Next string
	// Later is set on every page but the first.
	Later bool
	// Filter is the filter form, as the user set it.
	Filter InboxFilter
	// Continuing are the user's runs that continue in the background
	// after a decision. inbox.js keeps the list current; the page itself
	// never reloads.
	Continuing []ContinuingRun
	// Now is when the page was rendered, for "waited 3 min" labels.
	Now time.Time
	// Bulk: some card may be decided in a bulk (it has a checkbox), and
	// the page has the bulk form. SelectAll: every box is checked (the
	// page's link without JavaScript); SelectAllURL and SelectNoneURL are
	// this page with all and none checked.
	Bulk                        bool
	SelectAll                   bool
	SelectAllURL, SelectNoneURL string
}

// InboxFilter narrows the inbox to a configuration or a tool.
type InboxFilter struct {
	Configuration string // identifier; "" for all
	Tool          string
	// Configurations are the choices of the configuration filter.
	Configurations []Option
}

// Option is one choice of a select.
type Option struct {
	Value, Label string
}

// ContinuingRun is a run that continues in the background.
type ContinuingRun struct {
	ID            int64
	Configuration string
	Status        string // decided (waiting for a worker) or running
}

// InboxRun is one run waiting for a decision, with its forms.
type InboxRun struct {
	ID            int64
	Configuration string // the configuration's name
	// Owner is who started the run.
	Owner        string
	WaitingSince time.Time
	// Kind is "approval" or "input".
	Kind   string
	Digest string
	// Note explains something about the turn the calls do not, such as an
	// interrupted earlier attempt.
	Note  string
	Calls []Call
	// SecondApprover: the configuration needs an approver other than the
	// one who started the run (four eyes).
	SecondApprover bool
	// FourEyes: the signed-in user started this run and its configuration
	// needs a second approver; they may only deny it.
	FourEyes bool
	// CanOpen: the user may read the run (owner or admin): its page, its
	// prompt and what the model said.
	CanOpen bool
	// Title is the run's title, for who may read the run ("" otherwise).
	Title string
	// Prompt and Said are the run's prompt and the model's message with
	// the calls; empty for a decider who may not read the run.
	Prompt, Said string
	// Fields is the input form of an input turn.
	Fields []Field
	// Error is a message about the whole form after a refused submission.
	Error string

	// Deadline is when the turn expires (decision_timeout); zero for none.
	Deadline time.Time
	// EscalatedTo is the grant whose holders alone may decide the turn,
	// which nobody decided in time; "" when it was not escalated.
	// EscalatedAway: the user does not hold it, so the card shows the
	// turn without its forms.
	EscalatedTo   string
	EscalatedAway bool
	// Votes counts the approvals of a turn that needs several: "1 of 2
	// approvals: alice"; "" when one approval decides it.
	Votes string
	// Selectable: the card has a checkbox of the page's bulk form;
	// Selected: it is checked.
	Selectable, Selected bool
}

// Call is one pending tool call: what the decider approves.
type Call struct {
	ID   string
	Name string
	// Description is the tool's own, when the server knows the tool.
	Description string
	// Preview is the tool's line about what the call would do; "" when
	// the tool gives none.
	Preview string
	// Rule says which rule of the policy asked for votes on the call
	// ("rule big-refunds: 2 approvals"); "" when none did.
	Rule string
	// Args are the arguments as a table; Arguments the JSON, indented.
	Args      []Arg
	Arguments string
	// Edit is the form that approves the turn with this call's arguments
	// replaced; nil where the user may not approve.
	Edit *EditForm
	// Choice is the call's own approve or deny on a turn of two or more
	// calls; nil on a turn of one, and where the user may not approve.
	Choice *CallChoice
}

// CallChoice is one call's fieldset in the form that decides its turn:
// radios named calls.<call id>.decision and a reason named
// calls.<call id>.reason, with what a refused form chose and the message
// about it.
type CallChoice struct {
	Decision, Reason, Error string
}

// EditForm edits one pending call's arguments and approves its turn. A
// flat object's properties are Fields, named arguments.<call id>.<property>;
// any other arguments are JSON text in one field, arguments.<call id>.
type EditForm struct {
	Fields []Field
	// JSON is the arguments as text, when there are no Fields.
	JSON string
	// Error is a message about the arguments as a whole (and, for the
	// JSON field, about each of its properties).
	Error string
	// Open: a refused edit of this call, shown unfolded again.
	Open bool
	// Others is how many other calls of the turn the form approves as
	// they are.
	Others int
}

// Arg is one argument of a call: a value, or an object or list of values
// of its own (Nested), shown folded.
type Arg struct {
	Key    string
	Value  string
	Nested []Arg
}

// InboxRunPage is one run as a decider sees it on its own page: waiting,
// with its forms; or, after their decision, how the run stands.
type InboxRunPage struct {
	Page
	// Run is the waiting run; nil when it waits no more.
	Run *InboxRun
	// Decided is the user's decision and how the run stands since.
	Decided *DecidedView
	Now     time.Time
}

// DecidedView is a run after the viewer's decision.
type DecidedView struct {
	RunID         int64
	Configuration string
	// Summary says what the decision did and how the run ended, or that it
	// still continues.
	Summary string
	// Continuing: the run has not settled or paused yet; the page reloads
	// itself until it has (it has no forms).
	Continuing bool
}

// Field is one input of an input form, generated from a JSON Schema.
type Field struct {
	Name        string
	Label       string
	Description string
	// Type is string, integer, number or boolean; Enum, when set, makes a
	// select of its options.
	Type     string
	Enum     []string
	Required bool
	Min, Max *float64
	// Value is what the user typed, kept after a refused submission.
	Value string
	Error string
}

// RunPage is a run's detail page: its timeline of stored events.
type RunPage struct {
	Page
	Run RunSummary
	// Conversation is the run's transcript, turn by turn (see
	// conversation.templ).
	Conversation Conversation
	// Events are the run's stored events, shaped for display.
	Events []TimelineEvent
	// FailedDeliveries are the run's notifications the workers gave up
	// on; only admins are shown any.
	FailedDeliveries []FailedDelivery
}

// RunSummary describes a run at the top of its page.
type RunSummary struct {
	ID            int64
	Configuration string
	Owner         string
	Origin        string
	Status        string
	Reason        string
	Title         string
	Prompt        string
	Answer        string
	Iterations    int
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Waiting: the run waits for a decision, which is made in the inbox.
	Waiting bool
	// CanCancel: the run is not settled and the user may cancel it.
	CanCancel bool
	// Turn is the conversation's current turn; CanFollowUp: the run has
	// settled and the user may send it a follow-up message.
	Turn        int
	CanFollowUp bool
	// CanErase: the run is settled and the user may erase it.
	CanErase bool
	// Votes counts the approvals of the turn it waits on when that needs
	// several: "1 of 2 approvals: alice"; "" otherwise.
	Votes string
}

// HistoryPage is one page of the runs the user may see, newest first.
type HistoryPage struct {
	Page
	Runs   []HistoryRun
	Filter HistoryFilter
	// Admin: the owner filter is offered (admins see everyone's runs).
	Admin bool
	// Next is the address of the next page; "" on the last.
	Next string
}

// HistoryFilter is the history's filter form, as the user set it.
type HistoryFilter struct {
	Status, Configuration, Owner string
	// Mine keeps the runs the user decided.
	Mine                     bool
	Statuses, Configurations []Option
}

// HistoryRun is one run of the history. A run the user only decided shows
// its id, configuration, status, times and their decision: no owner and
// no link to its page.
type HistoryRun struct {
	ID            int64
	Configuration string
	Owner         string
	Status        string
	Reason        string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Decision is the user's latest decision about it ("approved").
	Decision  string
	DecidedAt time.Time
	// Rule is what a rule of the policy last decided about it ("approved
	// by policy:small-refunds: …"), for who may read the run.
	Rule    string
	CanOpen bool
	// Title is the run's title, for who may read the run.
	Title string
}

// inboxCardsMode tells inbox.js what to do with a run that starts waiting
// while the page is open: "all" — the page shows every waiting run, so
// the new card joins it; "paged" (not the last page, or not the first) —
// a notice says there is more, and the count follows; "filtered" — the
// notice only (the count counts every waiting run, not the filter's).
func inboxCardsMode(p InboxPage) string {
	switch {
	case p.Filter.Configuration != "" || p.Filter.Tool != "":
		return "filtered"
	case p.Next != "" || p.Later:
		return "paged"
	}
	return "all"
}
