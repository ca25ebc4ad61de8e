package web

import (
	"bytes"
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
// decision route with decision=approve, and the form goes to the pipeline
// as posted: it reads the edit against the turn it decides and checks it
// (runtime/decide_edit.go), and a 422 shows the form again, unfolded, with what
// was typed and a message per field.

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
		if !mine && !choiceField(turn, k) {
			stray = append(stray, k+" "+m)
		}
	}
	sort.Strings(stray)
	if len(stray) > 0 {
		msg += " " + strings.Join(stray, "; ") + "."
	}
	return msg
}
