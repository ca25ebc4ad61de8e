package runtime_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/store/testrig"
)

// typistYAML writes its answer in 30 pieces 10 ms apart, after a thought.
var typistYAML = func() string {
	var b strings.Builder
	b.WriteString("identifier: typist\nprovider:\n  type: scripted\n  script:\n    rounds:\n      - deltas:\n")
	b.WriteString("          - {text: \"Hm. \", thinking: true}\n")
	for i := range 30 {
		b.WriteString("          - {text: \"w" + string(rune('a'+i%26)) + " \", after: 10ms}\n")
	}
	return b.String()
}()

// textObserver records the pieces of text and the steps, in order, with
// when they came.
type textObserver struct {
	mu     sync.Mutex
	deltas []runtime.Delta
	at     []time.Time
	order  []string // "delta", "thinking" or the step's kind
}

func (o *textObserver) OnStep(s runtime.Step) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.order = append(o.order, string(s.Kind))
}

func (o *textObserver) OnDelta(d runtime.Delta) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.deltas, o.at = append(o.deltas, d), append(o.at, time.Now())
	kind := "delta"
	if d.Thinking {
		kind = "thinking"
	}
	o.order = append(o.order, kind)
}

// TestDeltasCoalesceBeforeTheirStep: 30 pieces 10 ms apart reach the
// observer as fewer, larger pieces at least 75 ms apart (the first at
// once, the last as the round ends), thinking apart from the answer, each with the turn, all of them
// before the round's step; a follower of the run in the same process
// gets the same pieces, before the llm event.
func TestDeltasCoalesceBeforeTheirStep(t *testing.T) {
	f := newFixture(t, 0, typistYAML)
	ctx := context.Background()
	c, err := f.Engine.Start(ctx, runtime.StartRequest{Configuration: "typist", Prompt: "type", Owner: f.owner})
	if err != nil {
		t.Fatal(err)
	}
	w := f.Engine.Watch(c.RunID(), 0)
	defer w.Close()
	followed := make(chan []string, 1)
	go func() {
		var got []string
		for {
			u, err := w.Next(ctx)
			if err != nil {
				t.Error(err)
				break
			}
			for _, d := range u.Deltas {
				got = append(got, "text:"+d.Text)
			}
			for _, e := range u.Events {
				got = append(got, string(e.Kind))
			}
			if u.Ended != "" {
				break
			}
		}
		followed <- got
	}()
	obs := &textObserver{}
	out := c.Run(ctx, obs)
	if out.Status != runtime.StatusCompleted {
		t.Fatalf("outcome %+v", out)
	}
	var answer strings.Builder
	for i, d := range obs.deltas {
		if d.Turn != 1 {
			t.Errorf("piece %d names turn %d, want 1", i, d.Turn)
		}
		if i == 0 && (!d.Thinking || d.Text != "Hm. ") {
			t.Errorf("first piece %+v, want the thought", d)
		}
		if i > 0 {
			if d.Thinking {
				t.Errorf("piece %d is thinking: %+v", i, d)
			}
			answer.WriteString(d.Text)
		}
		if i > 1 && i < len(obs.deltas)-1 && obs.at[i].Sub(obs.at[i-1]) < 70*time.Millisecond {
			t.Errorf("pieces %d and %d came %s apart, want them coalesced over 75 ms", i-1, i, obs.at[i].Sub(obs.at[i-1]))
		}
	}
	if answer.String() != out.Answer {
		t.Errorf("the pieces say %q, the answer is %q", answer.String(), out.Answer)
	}
	if n := len(obs.deltas); n > 10 || n < 3 {
		t.Errorf("%d pieces for 31 over 300 ms: want them coalesced (about 5)", n)
	}
	llm := strings.Index(strings.Join(obs.order, " "), "llm")
	if last := strings.LastIndex(strings.Join(obs.order, " "), "delta"); llm < 0 || last > llm {
		t.Errorf("order %v: want every piece before the llm step", obs.order)
	}
	got := <-followed
	joined := strings.Join(got, "|")
	if !strings.Contains(joined, "text:Hm. ") || strings.Index(joined, "llm") < strings.LastIndex(joined, "text:") {
		t.Errorf("the follower got %v: want the pieces, then the llm event", got)
	}
	var followedText strings.Builder
	for _, g := range got {
		if s, ok := strings.CutPrefix(g, "text:"); ok && s != "Hm. " {
			followedText.WriteString(s)
		}
	}
	if followedText.String() != out.Answer {
		t.Errorf("the follower's pieces say %q, want %q", followedText.String(), out.Answer)
	}
}

// brokenStream streams two pieces and then breaks, as a provider whose
// connection drops mid-answer.
type brokenStream struct{}

func (brokenStream) Round(_ context.Context, _ runtime.RoundRequest, onDelta func(runtime.Delta)) (runtime.RoundResult, error) {
	onDelta(runtime.Delta{Text: "thinking it over", Thinking: true})
	onDelta(runtime.Delta{Text: "So far, "})
	onDelta(runtime.Delta{Text: "so good"})
	return runtime.RoundResult{}, errors.New("the stream broke")
}

// TestPartialAnswerKeptWhenTheRoundBreaks: a round that ends without its
// step writes what it streamed at once, whatever the 1.5 s, and the
// conversation keeps it after the run failed: no longer streaming.
func TestPartialAnswerKeptWhenTheRoundBreaks(t *testing.T) {
	w := testrig.New(t, testrig.Configs(typistYAML), testrig.Engine(runtime.Options{
		Providers: func(*runtime.Configuration) (runtime.Provider, error) { return brokenStream{}, nil }}))
	ctx := context.Background()
	owner := w.Actor("owner")
	c, err := w.Engine.Start(ctx, runtime.StartRequest{Configuration: "typist", Prompt: "type", Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	if out := c.Run(ctx, nil); out.Status != runtime.StatusFailed || out.Reason != runtime.ReasonProviderFailed {
		t.Fatalf("outcome %+v, want failed by the provider", out)
	}
	page, err := w.Engine.Conversation(ctx, c.RunID(), owner, runtime.MessageQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	last := page.Messages[len(page.Messages)-1]
	if last.Role != "assistant" || last.Text.Value != "So far, so good" || last.Streaming || last.Turn != 1 {
		t.Errorf("last message %+v, want the partial answer kept, not streaming", last)
	}
	if last.Thinking.Withheld == false || last.Thinking.Size == 0 {
		t.Errorf("thinking %+v at the metadata level: want its size only", last.Thinking)
	}
}
