package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Every run has a title: the first line of its first prompt, cut at
// titleCut characters on a word boundary (CutTitle); with configuration
// title: generate the provider is asked once, after turn 1 completed, for
// a title of at most titleWords words, which replaces the cut one unless
// its owner set one meanwhile; and its owner (or an admin) may set one.
// A title is run content: sealed at rest, withheld from who may not read
// the run, emptied by an erase.

const (
	titleCut       = 80
	titleMax       = 120
	titleWords     = 8
	titleTimeout   = 10 * time.Second
	titleMaxTokens = 32
)

// Where a run's title comes from (runs.title_source).
const (
	TitleCut       = "cut"
	TitleGenerated = "generated"
	TitleSet       = "owner"
)

// TitleGenerate is the configuration's title value that asks the provider.
const TitleGenerate = "generate"

// titleInstruction is what the provider is asked, before the first prompt.
const titleInstruction = "Write a title of at most 8 words for the conversation that starts with the next message. Answer with the title alone: no quotes, no punctuation at the end."

// CutTitle is a prompt's first line, at most titleCut characters, cut at
// the last space before the limit (mid-word only for a longer word) and
// ended with "…" when it was cut.
func CutTitle(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	line = strings.Join(strings.FieldsFunc(line, unicode.IsSpace), " ") // tabs, \r and runs of spaces
	if utf8.RuneCountInString(line) <= titleCut {
		return line
	}
	runes := []rune(line)
	cut := string(runes[:titleCut-1])
	if i := strings.LastIndexByte(cut, ' '); i > 0 {
		cut = cut[:i]
	}
	return strings.TrimRight(cut, " ") + "…"
}

// checkTitle is what a title a person sets must be, trimmed: 1 to
// titleMax characters of valid UTF-8 without control characters.
func checkTitle(s string) (string, error) {
	switch {
	case !utf8.ValidString(s):
		return "", refuse(CodeInvalidRequest, "the title is not valid text (UTF-8)")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "", refuse(CodeInvalidRequest, "the title may not hold control characters (line breaks, tabs)")
	}
	s = strings.TrimSpace(s)
	switch n := utf8.RuneCountInString(s); {
	case n == 0:
		return "", refuse(CodeInvalidRequest, "the title is empty")
	case n > titleMax:
		return "", refuse(CodeInvalidRequest, "the title is %d characters long; at most %d", n, titleMax)
	}
	return s, nil
}

// cleanTitle reads a provider's answer as a title: its first line without
// quotes around it or a full stop after it, at most titleWords words;
// "" when nothing is left that checkTitle takes.
func cleanTitle(answer string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(answer), "\n")
	line = strings.Trim(strings.TrimSpace(line), "\"'“”‘’`*#")
	line = strings.TrimRight(strings.TrimPrefix(line, "Title:"), ".")
	words := strings.Fields(line)
	if len(words) > titleWords {
		words = words[:titleWords]
	}
	t, err := checkTitle(strings.Join(words, " "))
	if err != nil {
		return ""
	}
	return t
}

// SetTitle sets a run's title for its owner or an admin. Refusals:
// not_found (also for who may not read the run), invalid_request.
func (e *Engine) SetTitle(ctx context.Context, runID int64, actor Actor, title string) error {
	t, err := checkTitle(title)
	if err != nil {
		return err
	}
	run, err := e.store.Run(ctx, runID)
	if errors.Is(err, ErrNotFound) || (err == nil && !actor.MayRead(run.OwnerID)) {
		return refuse(CodeNotFound, "no run %d", runID)
	}
	if err != nil {
		return err
	}
	sealed, err := e.sealText(t, RunPlace("title", runID))
	if err != nil {
		return err
	}
	if err := e.store.SetTitle(ctx, runID, sealed, TitleSet); errors.Is(err, ErrNotFound) {
		return refuse(CodeNotFound, "no run %d", runID)
	} else if err != nil {
		return err
	}
	return nil
}

// firstUserMessage is the content of a transcript's first user message:
// the run's prompt.
func firstUserMessage(msgs []Message) string {
	for _, m := range msgs {
		if m.Role == "user" {
			return m.Content
		}
	}
	return ""
}

// generateTitle asks the provider once for a run's title, after its first
// turn completed, and stores it unless a person set one meanwhile. It runs
// after the settle was committed and told, on its own goroutine: no
// stream waits for it. A failure keeps the cut title and is logged.
func (c *Continuation) generateTitle(prompt string) {
	ctx, cancel := context.WithTimeout(context.Background(), titleTimeout)
	defer cancel()
	err := func() error {
		res, err := c.provider.Round(ctx, RoundRequest{Round: 1, Title: true, MaxTokens: titleMaxTokens,
			Model: c.cfg.Provider.Model, Messages: []Message{
				{Role: "system", Content: titleInstruction}, {Role: "user", Content: prompt}}}, nil)
		if err != nil {
			return err
		}
		t := cleanTitle(res.Text)
		if t == "" {
			return fmt.Errorf("the answer %q is no title", res.Text)
		}
		sealed, err := c.e.sealText(t, RunPlace("title", c.run.ID))
		if err != nil {
			return err
		}
		return c.e.store.SetTitle(ctx, c.run.ID, sealed, TitleGenerated)
	}()
	if err != nil && !errors.Is(err, ErrClaimLost) {
		c.e.log.Warn("title not generated; the run keeps its prompt's", "run", c.run.ID, "err", err)
	}
}
