package web_test

import (
	"os"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConversationFitsA390PixelScreen: a run's page with a two-turn
// conversation, its calls and results as keys and values, scrolls no
// wider than a phone's screen. With TURNSTILE_CONVERSATION_PNG set it
// writes the page's screenshot there, to look at.
func TestConversationFitsA390PixelScreen(t *testing.T) {
	a := newAppWith(t, 0, appEngine{configs: []string{talkConfig}})
	run, _ := completedTalk(t, a)
	addTurn(t, a, run.RunID, nil, followUp(2)...)
	b := narrowTab(t, a, "owner")
	b.do("open the run", stepTimeout, chromedp.Navigate(b.base+runPath(run.RunID, "")),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="conversation"] [data-turn="2"]`)), loaded())
	wantFits(t, b, "the run's conversation")
	if path := os.Getenv("TURNSTILE_CONVERSATION_PNG"); path != "" {
		b.do("set a 1280 px window", stepTimeout, chromedp.EmulateViewport(1280, 800))
		png := get(b, "screenshot", chromedp.FullScreenshot(100))
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
