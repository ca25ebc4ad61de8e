// Package scripted is a deterministic provider: a YAML script says, round by
// round, what the "model" answers and which tools it calls. The demo, the
// tests and the benchmarks use it so that a run goes the same way every time.
package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Script is the whole answer of a scripted model: one Round per provider
// round, in order.
type Script struct {
	Rounds []Round `json:"rounds"`
	// Title answers the round that asks for the conversation's title
	// (configuration title: generate); without one that round fails, as
	// a provider's can, and the run keeps its prompt's title.
	Title string `json:"title,omitempty"`
}

// Round is what the model answers in one provider round.
type Round struct {
	// Delay is slept before the round answers, to imitate a slow model.
	Delay time.Duration
	// Text is the answer, given whole at the end of the round (its pieces
	// joined): nothing streams.
	Text []string
	// Deltas, instead of Text, stream the answer (and thinking) piece by
	// piece, in time.
	Deltas []Delta
	// ToolCalls are the calls the model asks for in this round.
	ToolCalls []Call
	// IfDenied, when set, is played instead when a person denied one of
	// the calls the model made last: a scripted model that answers a
	// denial as a real one would ("nothing was refunded").
	IfDenied *Round
}

// Delta is a timed piece of a round's answer: sent After the piece before
// it (the first, after the round's delay), as a model streams.
type Delta struct {
	Text  string
	After time.Duration
	// Thinking marks a piece of reasoning rather than of the answer.
	Thinking bool
}

// deltaJSON is Delta as stored: the wait as a duration string.
type deltaJSON struct {
	Text     string `json:"text"`
	After    string `json:"after,omitempty"`
	Thinking bool   `json:"thinking,omitempty"`
}

// MarshalJSON writes the wait as a Go duration string ("250ms").
func (d Delta) MarshalJSON() ([]byte, error) {
	j := deltaJSON{Text: d.Text, Thinking: d.Thinking}
	if d.After != 0 {
		j.After = d.After.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote; an unknown field or a wait
// that is not a duration is an error.
func (d *Delta) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var j deltaJSON
	if err := dec.Decode(&j); err != nil {
		return err
	}
	var after time.Duration
	if j.After != "" {
		var err error
		if after, err = time.ParseDuration(j.After); err != nil {
			return fmt.Errorf("after %q is not a duration", j.After)
		}
	}
	*d = Delta{Text: j.Text, After: after, Thinking: j.Thinking}
	return nil
}

// Call is one tool call of a round. String values in Arguments may contain
// ${prompt} and ${order_id}, filled in from the run's prompt.
type Call struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

// roundJSON is Round as stored: the delay as a duration string.
type roundJSON struct {
	Delay     string   `json:"delay,omitempty"`
	Text      []string `json:"text,omitempty"`
	Deltas    []Delta  `json:"deltas,omitempty"`
	ToolCalls []Call   `json:"tool_calls,omitempty"`
	IfDenied  *Round   `json:"if_denied,omitempty"`
}

// MarshalJSON writes the delay as a Go duration string ("3s").
func (r Round) MarshalJSON() ([]byte, error) {
	j := roundJSON{Text: r.Text, Deltas: r.Deltas, ToolCalls: r.ToolCalls, IfDenied: r.IfDenied}
	if r.Delay != 0 {
		j.Delay = r.Delay.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote; an unknown field or a delay
// that is not a duration is an error.
func (r *Round) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var j roundJSON
	if err := dec.Decode(&j); err != nil {
		return err
	}
	var d time.Duration
	if j.Delay != "" {
		var err error
		if d, err = time.ParseDuration(j.Delay); err != nil {
			return fmt.Errorf("delay %q is not a duration", j.Delay)
		}
	}
	*r = Round{Delay: d, Text: j.Text, Deltas: j.Deltas, ToolCalls: j.ToolCalls, IfDenied: j.IfDenied}
	return nil
}

// UnmarshalJSON keeps numbers in the arguments as json.Number, so that a
// script read back from JSON equals the one that was parsed from YAML.
func (c *Call) UnmarshalJSON(data []byte) error {
	var j struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	args, err := decodeArguments(j.Arguments)
	if err != nil {
		return err
	}
	*c = Call{Name: j.Name, Arguments: args}
	return nil
}

// decodeArguments reads a JSON object with numbers kept as json.Number;
// empty input or null is no arguments.
func decodeArguments(raw []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var args map[string]any
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	return args, nil
}

// FromJSON reads a script stored as JSON (Configuration.Provider.Script).
// It fails on JSON that is not a script, an unknown field, a bad delay, a
// call without a name or a script without rounds.
func FromJSON(raw json.RawMessage) (*Script, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("scripted: read script: %w", err)
	}
	if len(s.Rounds) == 0 {
		return nil, fmt.Errorf("scripted: read script: the script has no rounds")
	}
	for i, r := range s.Rounds {
		if r.Delay < 0 {
			return nil, fmt.Errorf("scripted: read script: round %d: delay must not be negative", i+1)
		}
		if len(r.Text) > 0 && len(r.Deltas) > 0 {
			return nil, fmt.Errorf("scripted: read script: round %d: give text or deltas, not both", i+1)
		}
		for j, d := range r.Deltas {
			if d.After < 0 {
				return nil, fmt.Errorf("scripted: read script: round %d: delta %d: after must not be negative", i+1, j+1)
			}
		}
		for j, c := range r.ToolCalls {
			if c.Name == "" {
				return nil, fmt.Errorf("scripted: read script: round %d: tool call %d has no name", i+1, j+1)
			}
		}
	}
	return &s, nil
}

// JSON returns the script as stored in Configuration.Provider.Script. It
// fails only on arguments that JSON cannot hold.
func (s *Script) JSON() (json.RawMessage, error) {
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("scripted: write script: %w", err)
	}
	return raw, nil
}

// MarshalYAML writes the script in the shape Parse reads: a single text
// delta as a plain string, the delay as a duration string, numbers as YAML
// numbers.
func (s *Script) MarshalYAML() (any, error) {
	type yamlCall struct {
		Name      string         `yaml:"name"`
		Arguments map[string]any `yaml:"arguments,omitempty"`
	}
	type yamlDelta struct {
		Text     string `yaml:"text"`
		After    string `yaml:"after,omitempty"`
		Thinking bool   `yaml:"thinking,omitempty"`
	}
	type yamlRound struct {
		Delay     string      `yaml:"delay,omitempty"`
		Text      any         `yaml:"text,omitempty"`
		Deltas    []yamlDelta `yaml:"deltas,omitempty"`
		ToolCalls []yamlCall  `yaml:"tool_calls,omitempty"`
	}
	out := struct {
		Rounds []yamlRound `yaml:"rounds"`
		Title  string      `yaml:"title,omitempty"`
	}{Rounds: make([]yamlRound, 0, len(s.Rounds)), Title: s.Title}
	for _, r := range s.Rounds {
		yr := yamlRound{}
		if r.Delay != 0 {
			yr.Delay = r.Delay.String()
		}
		switch len(r.Text) {
		case 0:
		case 1:
			yr.Text = r.Text[0]
			if r.Text[0] == "" {
				yr.Text = r.Text // omitempty would drop a lone ""
			}
		default:
			yr.Text = r.Text
		}
		for _, d := range r.Deltas {
			yd := yamlDelta{Text: d.Text, Thinking: d.Thinking}
			if d.After != 0 {
				yd.After = d.After.String()
			}
			yr.Deltas = append(yr.Deltas, yd)
		}
		for _, c := range r.ToolCalls {
			args, _ := yamlValue(c.Arguments).(map[string]any)
			yr.ToolCalls = append(yr.ToolCalls, yamlCall{Name: c.Name, Arguments: args})
		}
		out.Rounds = append(out.Rounds, yr)
	}
	return out, nil
}

// yamlValue turns json.Number into a Go number, which YAML writes unquoted.
func yamlValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v == nil {
			return nil
		}
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = yamlValue(e)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, e := range v {
			l[i] = yamlValue(e)
		}
		return l
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return i
		}
		if f, err := strconv.ParseFloat(string(v), 64); err == nil {
			return f
		}
		return string(v)
	default:
		return v
	}
}
