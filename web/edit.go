package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"sort"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime"
	"github.com/turnstile-dev/turnstile/runtime/schema"
	"github.com/turnstile-dev/turnstile/templates"
)

// Edit, then approve, on the pages. The inbox card has one "Edit and
// approve" form per pending call. For a tool whose arguments are a flat
// object (every property a string, number, integer or boolean) the form
// has one control per property, named arguments.<call id>.<property>; for
// any other it has one JSON text field, arguments.<call id>. A hidden
// edit=<call id> says which call the form edits, so that a form whose
// every checkbox is clear still counts as an edit. Both post to the
// decision route with decision=approve; the pipeline checks the edit
// (runtime/edit.go) and a 422 shows the form again, unfolded, with what
// was typed and a message per field.

// editPrefix starts the names of an edit form's fields.
const editPrefix = "arguments."

// editedApproval asks the engine to approve or deny as the form says,
// with the edits the form carries. Reading them takes the pending turn (its
// call ids and its tools' schemas); when the run waits on none, or a field
// names no call of it, what was posted is passed on as it is, for the
// pipeline to refuse (not_waiting, or no such call): an edit is never
// dropped silently.
func (s *Server) editedApproval(req runtime.DecideRequest, form url.Values) ask {
	return func(ctx context.Context, path string) (*runtime.Continuation, error) {
		if hasEdits(form) {
			turn, err := s.engine.Turn(ctx, req.RunID)
			if err != nil {
				return nil, err
			}
			req.Arguments, req.FormErrors = s.formEdits(turn, form)
		}
		return s.approval(req)(ctx, path)
	}
}

func hasEdits(form url.Values) bool {
	if len(form["edit"]) > 0 {
		return true
	}
	for k := range form {
		if strings.HasPrefix(k, editPrefix) {
			return true
		}
	}
	return false
}

// formEdits reads a form's edits into replacement arguments by call id,
// and the fields that do not even parse (text in a number field), keyed
// as the pipeline keys its messages (runtime.EditField).
func (s *Server) formEdits(turn *runtime.PendingTurn, form url.Values) (map[string]json.RawMessage, map[string]string) {
	var calls []runtime.ToolCall
	if turn != nil {
		calls = append(calls, turn.Calls...)
	}
	// The longest call id first: a call id may contain a dot, and then
	// "arguments.a.b.c" must be read as call "a.b", property "c", when
	// the turn has a call "a.b".
	sort.Slice(calls, func(i, j int) bool { return len(calls[i].ID) > len(calls[j].ID) })
	texts := map[string]string{}
	flat := map[string]url.Values{}
	raw := map[string]json.RawMessage{}
	for k, vs := range form {
		rest, ok := strings.CutPrefix(k, editPrefix)
		if !ok || len(vs) == 0 {
			continue
		}
		matched := false
		for _, c := range calls {
			if rest == c.ID {
				texts[c.ID], matched = vs[0], true
				break
			}
			if prop, ok := strings.CutPrefix(rest, c.ID+"."); ok {
				if flat[c.ID] == nil {
					flat[c.ID] = url.Values{}
				}
				flat[c.ID][prop], matched = vs, true
				break
			}
		}
		if !matched {
			raw[rest] = json.RawMessage(vs[0])
		}
	}
	for _, id := range form["edit"] {
		if _, ok := texts[id]; ok {
			continue
		}
		if _, ok := flat[id]; !ok {
			flat[id] = url.Values{}
		}
	}
	var formErrors map[string]string
	for _, c := range calls {
		if text, ok := texts[c.ID]; ok {
			raw[c.ID] = json.RawMessage(text)
			continue
		}
		values, ok := flat[c.ID]
		if !ok {
			continue
		}
		delete(flat, c.ID)
		t, known := s.engine.Tool(c.Name)
		if !known {
			// No form of fields was offered for it: the edit is read
			// as nothing, and the pipeline says what is missing.
			raw[c.ID] = json.RawMessage(`{}`)
			continue
		}
		args, msgs := schema.FromForm(t.Spec().Parameters, values)
		raw[c.ID] = args
		for prop, msg := range msgs {
			if formErrors == nil {
				formErrors = map[string]string{}
			}
			formErrors[runtime.EditField(c.ID, prop)] = msg
		}
	}
	// An edit= naming no call of the turn is refused like a field would be.
	for id := range flat {
		raw[id] = json.RawMessage(`{}`)
	}
	return raw, formErrors
}

// editView is the "Edit and approve" form of one call: prefilled with its
// arguments, or, after a refused edit of this very call, with what was
// typed and the pipeline's messages.
func editView(c runtime.ToolCall, params json.RawMessage, others int, refused *formState) *templates.EditForm {
	e := &templates.EditForm{Others: others}
	var typed url.Values
	var errs map[string]string
	if refused != nil && editedHere(refused.values, c.ID) {
		typed, errs, e.Open = refused.values, refused.fields, true
	}
	e.Error = errs[runtime.EditField(c.ID, "")]
	if fields, values, ok := flatForm(params, c.Arguments); ok && (typed == nil || typed[runtime.EditField(c.ID, "")] == nil) {
		for _, f := range fields {
			name := runtime.EditField(c.ID, f.Name)
			v := values[f.Name]
			if typed != nil {
				v = typed.Get(name)
			}
			e.Fields = append(e.Fields, templates.Field{Name: name, Label: f.Title, Description: f.Description,
				Type: f.Type, Enum: f.Enum, Required: f.Required, Min: f.Minimum, Max: f.Maximum,
				Value: v, Error: errs[name]})
		}
		return e
	}
	e.JSON = indent(c.Arguments)
	if typed != nil {
		e.JSON = typed.Get(runtime.EditField(c.ID, ""))
	}
	// The JSON field shows every message about the call's arguments.
	var msgs []string
	for k, msg := range errs {
		if prop, ok := strings.CutPrefix(k, runtime.EditField(c.ID, "")+"."); ok {
			msgs = append(msgs, prop+" "+msg)
		}
	}
	sort.Strings(msgs)
	if len(msgs) > 0 {
		if e.Error != "" {
			msgs = append([]string{e.Error}, msgs...)
		}
		e.Error = strings.Join(msgs, "; ")
	}
	return e
}

// editedHere reports whether a posted form edited the call.
func editedHere(form url.Values, callID string) bool {
	for _, id := range form["edit"] {
		if id == callID {
			return true
		}
	}
	for k := range form {
		if k == runtime.EditField(callID, "") || strings.HasPrefix(k, runtime.EditField(callID, "")+".") {
			return true
		}
	}
	return false
}

// flatForm returns the fields of a flat object schema and the call's
// arguments as their text, or false when a form of fields could not say
// everything the arguments do (a nested value, a key the schema does not
// list): such a call is edited as JSON.
func flatForm(params, args json.RawMessage) ([]schema.Field, map[string]string, bool) {
	if len(bytes.TrimSpace(params)) == 0 {
		return nil, nil, false
	}
	fields, err := schema.Fields(params)
	if err != nil || len(fields) == 0 {
		return nil, nil, false
	}
	known := map[string]bool{}
	for _, f := range fields {
		switch f.Type {
		case "string", "integer", "number", "boolean":
		default:
			return nil, nil, false
		}
		known[f.Name] = true
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil {
		return nil, nil, false
	}
	values := map[string]string{}
	for k, v := range m {
		if !known[k] {
			return nil, nil, false
		}
		switch v := v.(type) {
		case string:
			values[k] = v
		case json.Number:
			values[k] = v.String()
		case bool:
			values[k] = "false"
			if v {
				values[k] = "true"
			}
		default:
			return nil, nil, false
		}
	}
	return fields, values, true
}

// editRefusal is the card's message about a refused edit: the form's, and
// what no call's form can show (a field of a call the turn does not have).
func editRefusal(turn runtime.PendingTurn, refused *formState) string {
	msg := refused.msg
	var stray []string
	for k, m := range refused.fields {
		mine := false
		for _, c := range turn.Calls {
			if k == runtime.EditField(c.ID, "") || strings.HasPrefix(k, runtime.EditField(c.ID, "")+".") {
				mine = true
			}
		}
		if !mine {
			stray = append(stray, k+" "+m)
		}
	}
	sort.Strings(stray)
	if len(stray) > 0 {
		msg += " " + strings.Join(stray, "; ") + "."
	}
	return msg
}
