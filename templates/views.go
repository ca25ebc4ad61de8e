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

// InboxPage lists what the user may decide, oldest first.
type InboxPage struct {
	Page
	Runs []InboxRun
	// Continuing are the user's runs that continue in the background
	// after a decision (durable path); while there are any the page
	// refreshes itself.
	Continuing []ContinuingRun
	// Now is when the page was rendered, for "waited 3 min" labels.
	Now time.Time
}

// ContinuingRun is a run a worker carries on.
type ContinuingRun struct {
	ID            int64
	Configuration string
	Status        string // decided (waiting for a worker) or running
}

// InboxRun is one run waiting for a decision, with its forms.
type InboxRun struct {
	ID            int64
	Configuration string // the configuration's name
	WaitingSince  time.Time
	// Kind is "approval" or "input".
	Kind   string
	Digest string
	// Note explains something about the turn the calls do not, such as an
	// interrupted earlier attempt.
	Note  string
	Calls []Call
	// FourEyes: the signed-in user started this run and its configuration
	// needs a second approver; they may only deny it.
	FourEyes bool
	// CanOpen: the user may open the run's detail page (owner or admin).
	CanOpen bool
	// Fields is the input form of an input turn.
	Fields []Field
	// Error is a message about the whole form after a refused submission.
	Error string
}

// Call is one pending tool call: what the decider approves.
type Call struct {
	ID        string
	Name      string
	Arguments string // indented JSON
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
	Run    RunSummary
	Events []Event
}

// RunSummary describes a run at the top of its page.
type RunSummary struct {
	ID            int64
	Configuration string
	Owner         string
	Origin        string
	Status        string
	Reason        string
	Prompt        string
	Answer        string
	Iterations    int
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Waiting: the run waits for a decision, which is made in the inbox.
	Waiting bool
	// CanCancel: the run is not settled and the user may cancel it.
	CanCancel bool
}

// Event is one stored step of a run.
type Event struct {
	Seq      int
	Kind     string
	Round    int
	Duration string
	At       time.Time
	Payload  string // indented JSON, as stored (after the privacy filter)
}
