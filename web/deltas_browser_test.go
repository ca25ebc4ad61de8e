package web_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// textSeen is what the playground showed while the model wrote.
type textSeen struct {
	Texts    []string `json:"texts"`
	Thinking string   `json:"thinking"`
	LiveGone bool     `json:"liveGone"`
}

// watchLiveText notes the live item's text at each DOM mutation, and
// answers once the round's llm step is on the page.
const watchLiveText = `() => {
	const seen = window.__turnstileText || (window.__turnstileText = {texts: [], thinking: ''});
	const text = document.querySelector('[data-testid="playground-live-text"]');
	const thought = document.querySelector('[data-testid="playground-live-thinking"]');
	if (text && seen.texts[seen.texts.length - 1] !== text.textContent) seen.texts.push(text.textContent);
	if (thought) seen.thinking = thought.textContent;
	if (!document.querySelector('[data-testid="playground-step"][data-kind="llm"]')) return false;
	seen.liveGone = !document.querySelector('[data-testid="playground-live"]');
	return seen;
}`

// TestBrowserPlaygroundShowsTextAsItIsWritten: the playground shows the
// model's answer growing piece by piece, its thinking folded, and the
// round's step takes the live text's place.
func TestBrowserPlaygroundShowsTextAsItIsWritten(t *testing.T) {
	a := newAppWith(t, 0, appEngine{configs: []string{streamerConfig}})
	b := openTab(t, a, true)
	b.signIn("admin")
	b.do("start the streamer", stepTimeout,
		chromedp.Navigate(b.base+"/playground"),
		chromedp.WaitVisible(chromedp.CSS("#playground-prompt")),
		loaded(),
		chromedp.SetValue(chromedp.CSS("#playground-configuration"), "streamer"),
		chromedp.SendKeys(chromedp.CSS("#playground-prompt"), "Refund "+a.Order(t)),
		chromedp.Click(chromedp.CSS(`[data-testid="playground-form"] button[type="submit"]`)),
	)
	seen := get(b, "watch the text arrive", chromedp.PollFunction[textSeen](watchLiveText,
		chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(stepTimeout)))
	// The round's last piece and its step can come in one read of the
	// stream, and then the step replaces the live text before the page
	// paints the last piece: the live text grows towards the answer, and
	// the step shows it whole.
	const answer = "Refunding the order now."
	if len(seen.Texts) < 2 || !strings.HasPrefix(answer, seen.Texts[len(seen.Texts)-1]) {
		t.Errorf("the live text went %q, want it growing towards the round's answer", seen.Texts)
	}
	if step := text(b, `[data-testid="playground-step"][data-kind="llm"]`); !strings.Contains(step, answer) {
		t.Errorf("the round's step shows %q, want the whole answer %q", step, answer)
	}
	for i := 1; i < len(seen.Texts); i++ {
		if !strings.HasPrefix(seen.Texts[i], seen.Texts[i-1]) {
			t.Errorf("the live text went %q, want each the one before and more", seen.Texts)
		}
	}
	if seen.Thinking != "Weighing the refund. " || !seen.LiveGone {
		t.Errorf("thinking %q, live item gone %v: want the thought folded, and the step in the live text's place", seen.Thinking, seen.LiveGone)
	}
}
