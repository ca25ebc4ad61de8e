package templates

import "fmt"

// PlaygroundPage is the admins' playground: the form that starts a run
// and the output area where its steps appear. After a plain form post
// (no JavaScript) Result holds the run as far as it went; playground.js
// fills the same area from the stream instead.
type PlaygroundPage struct {
	Page
	// Configurations are the active configurations a run can start with.
	Configurations []PlaygroundConfiguration
	// Selected and Prompt fill the start form again after a run.
	Selected string // identifier
	Prompt   string
	Result   *PlaygroundResult
}

// PlaygroundConfiguration is one choice of the configuration picker.
type PlaygroundConfiguration struct {
	Identifier string
	Name       string
	// FourEyes: the configuration needs a second approver, so the admin
	// who starts a run cannot approve it here.
	FourEyes bool
}

// PlaygroundResult is a run as a continuation left it: every step it
// recorded, with full content, and how it ended.
type PlaygroundResult struct {
	RunID         int64
	Configuration string // the configuration's name
	FourEyes      bool
	Steps         []PlaygroundStep
	Outcome       PlaygroundOutcome
}

// PlaygroundStep is one recorded step with its content before the privacy
// filter.
type PlaygroundStep struct {
	Seq      int
	Kind     string
	Round    int
	Duration string
	Content  string // indented JSON
}

// PlaygroundOutcome is the terminal line of the playground stream, shaped
// for display.
type PlaygroundOutcome struct {
	// Event is done, awaiting_approval, awaiting_input, cancelled or
	// error, as in the stream.
	Event string
	// Answer, Iterations and the token counts describe a finished run.
	Answer                    string
	Iterations                int
	InputTokens, OutputTokens int
	// Code and Message say why a run ended in error.
	Code    string
	Message string
	// Failure says why a failed run failed; nil for any other outcome.
	Failure *RunFailure
	// Digest, Note and Calls describe a pause; Tool and Fields an input
	// pause.
	Digest string
	Note   string
	Calls  []Call
	Tool   string
	Fields []Field
}

func playgroundResumeURL(id int64) string { return fmt.Sprintf("/playground/runs/%d/resume", id) }
func playgroundInputURL(id int64) string  { return fmt.Sprintf("/playground/runs/%d/input", id) }
