package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Edit, then approve. An approval may replace the arguments of pending
// calls; the replacements are checked here, after every check that writes
// nothing and before the claim, so that an edit the tool would not take is
// refused with nothing written. The turn digest still names the turn as it
// was offered; the replacements are stored on the decision, and the
// continuation runs the calls with them and rewrites the model's message
// so that the transcript shows each call as executed.
//
// Field keys of an invalid_input refusal about an edit: EditField(id, "")
// for the value as a whole ("arguments.<call id>"), EditField(id, prop) for
// one top-level property ("arguments.<call id>.<property>"), the names the
// inbox's edit form gives its controls.

// EditField is the key under which a refusal of an edited call's arguments
// names a field: "arguments.<call id>" for the whole value, or
// "arguments.<call id>.<property>" for one of its top-level properties.
func EditField(callID, property string) string {
	if property == "" {
		return editPrefix + callID
	}
	return editPrefix + callID + "." + property
}

// editPrefix starts the names of an edit form's fields.
const editPrefix = "arguments."

// An edit form, as the pages post it: for a tool whose arguments are a flat
// object, one field per property, named EditField(call id, property); for
// any other one JSON text field, EditField(call id, ""); and edit=<call id>
// to say which call the form edits, so that a form whose every checkbox
// is clear still counts as an edit. The pipeline reads it against the
// pending turn (readEditForm) where it checks edits.

// editFormField is the name of an edit form's field that names the call it
// edits.
const editFormField = "edit"

// hasEdits reports whether a posted form edits a call.
func hasEdits(form map[string][]string) bool {
	if len(form[editFormField]) > 0 {
		return true
	}
	for k := range form {
		if strings.HasPrefix(k, editPrefix) {
			return true
		}
	}
	return false
}

// readEditForm reads an edit form into replacement arguments by call id,
// for checkEdits, and the fields that do not even parse (text in a number
// field), keyed as EditField keys. The fields of a call are read by its
// built-in tool's parameters schema. What names no call of the turn is
// passed on as it is, for checkEdits to refuse: an edit is never dropped
// silently.
func (e *Engine) readEditForm(turn *PendingTurn, form map[string][]string) (map[string]json.RawMessage, map[string]string) {
	calls := append([]ToolCall(nil), turn.Calls...)
	// The longest call id first: a call id may contain a dot, and then
	// "arguments.a.b.c" must be read as call "a.b", property "c", when
	// the turn has a call "a.b".
	sort.Slice(calls, func(i, j int) bool { return len(calls[i].ID) > len(calls[j].ID) })
	texts := map[string]string{}
	flat := map[string]map[string][]string{}
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
					flat[c.ID] = map[string][]string{}
				}
				flat[c.ID][prop], matched = vs, true
				break
			}
		}
		if !matched {
			raw[rest] = json.RawMessage(vs[0])
		}
	}
	for _, id := range form[editFormField] {
		if _, ok := texts[id]; ok {
			continue
		}
		if _, ok := flat[id]; !ok {
			flat[id] = map[string][]string{}
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
		t, known := e.Tool(c.Name)
		if !known {
			// No form of fields was offered for it: the edit is read
			// as nothing, and checkEdits says what is missing.
			raw[c.ID] = json.RawMessage(`{}`)
			continue
		}
		args, msgs := e.validator.FromForm(t.Spec().Parameters, values)
		raw[c.ID] = args
		for prop, msg := range msgs {
			if formErrors == nil {
				formErrors = map[string]string{}
			}
			formErrors[EditField(c.ID, prop)] = msg
		}
	}
	// An edit= naming no call of the turn is refused like a field would be.
	for id := range flat {
		raw[id] = json.RawMessage(`{}`)
	}
	return raw, formErrors
}

// checkEdits validates an approval's replacement arguments: each must name
// a call of the pending turn, be strictly read JSON (NormalizeJSON), be an
// object, and satisfy the parameters schema of the call's tool. formErrors
// are fields a surface could not even read (text where a number belongs),
// already keyed as EditField keys. It returns the replacements as stored
// (a JSON object by call id, normalized; nil when none changes anything)
// or an invalid_input refusal naming every bad field at once. The tools it
// checked the edits against stay on the pipeline (p.tools): an edited
// call's standing name is asked of its tool again (see standingNames).
func (p *pipeline) checkEdits(ctx context.Context, edits map[string]json.RawMessage, formErrors map[string]string) (json.RawMessage, error) {
	if len(edits) == 0 && len(formErrors) == 0 {
		return nil, nil
	}
	calls := map[string]ToolCall{}
	var ids []string
	for _, c := range p.state.Pending.Calls {
		calls[c.ID] = c
		ids = append(ids, c.ID)
	}
	fields := map[string]string{}
	for k, v := range formErrors {
		fields[k] = v
	}
	var unknown []string
	for id := range edits {
		if _, ok := calls[id]; !ok {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		for _, id := range unknown {
			fields[EditField(id, "")] = "is not a call of the pending turn"
		}
		return nil, &Refusal{Code: CodeInvalidInput, Fields: fields,
			Message: fmt.Sprintf("the pending turn has no call %s; its calls are %s", quoteAll(unknown), quoteAll(ids))}
	}
	out := map[string]json.RawMessage{}
	for _, id := range ids {
		raw, ok := edits[id]
		if !ok {
			continue
		}
		call := calls[id]
		args, err := NormalizeJSON(raw)
		var bad *JSONError
		switch {
		case errors.As(err, &bad):
			key := EditField(id, "")
			if len(bad.Path) > 0 {
				key = EditField(id, bad.Path[0])
			}
			fields[key] = bad.Error()
			continue
		case err != nil:
			fields[EditField(id, "")] = "is not valid JSON"
			continue
		case len(args) == 0 || args[0] != '{':
			fields[EditField(id, "")] = "must be a JSON object of the tool's arguments"
			continue
		}
		if p.tools == nil {
			if p.tools, err = p.e.turnTools(ctx, p.cfg, p.state.Pending.ToolNames()); err != nil {
				return nil, err
			}
		}
		t, known := p.tools[call.Name]
		if !known {
			fields[EditField(id, "")] = fmt.Sprintf("cannot be checked: the tool %s is not available now", call.Name)
			continue
		}
		if sch := t.Spec().Parameters; len(bytes.TrimSpace(sch)) > 0 {
			msgs, err := p.e.validator.Errors(sch, args)
			if err != nil {
				return nil, fmt.Errorf("runtime: check edited arguments of %s: %w", call.Name, err)
			}
			for prop, msg := range msgs {
				fields[EditField(id, prop)] = msg
			}
			if msgs != nil {
				continue
			}
		}
		// An edit that changes nothing is no edit: the approval does not
		// name it as one.
		if was, err := NormalizeJSON(call.Arguments); err == nil && bytes.Equal(was, args) {
			continue
		}
		out[id] = args
	}
	if len(fields) > 0 {
		return nil, &Refusal{Code: CodeInvalidInput, Fields: fields,
			Message: "the edited arguments do not fit the tool: " + describeFields(fields)}
	}
	if len(out) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("runtime: encode edited arguments: %w", err)
	}
	return b, nil
}

// turnTools returns each named tool the configuration has, by name, found
// as the continuation finds its tools: the configuration's tool source
// asked only for names that are not built-in tools it allows. A tool that
// cannot be found is left out.
func (e *Engine) turnTools(ctx context.Context, cfg *Configuration, names []string) (map[string]Tool, error) {
	out := map[string]Tool{}
	var rest []string
	for _, n := range names {
		if t, ok := e.allowedTool(cfg, n); ok {
			out[n] = t
		} else {
			rest = append(rest, n)
		}
	}
	if len(rest) == 0 || e.source == nil {
		return out, nil
	}
	// The source's error is not the decider's: what it did bring is used,
	// and a tool it could not bring is reported as not available.
	tools, err := e.source.Tools(ctx, cfg)
	if err != nil {
		e.log.Warn("configuration's tools unavailable to check an edit", "configuration", cfg.Identifier, "err", err)
	}
	for _, t := range tools {
		name := t.Spec().Name
		for _, n := range rest {
			if name == n {
				out[n] = t
			}
		}
	}
	return out, nil
}

// builtinParameters is the parameters schemas of the turn's built-in
// tools, by name, for pages: what turnTools finds without asking the tool
// source.
func (e *Engine) builtinParameters(cfg *Configuration, turn *PendingTurn) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	if cfg == nil {
		return out
	}
	for _, n := range turn.ToolNames() {
		if t, ok := e.allowedTool(cfg, n); ok {
			out[n] = t.Spec().Parameters
		}
	}
	return out
}

// allowedTool is a built-in tool the configuration names.
func (e *Engine) allowedTool(cfg *Configuration, name string) (Tool, bool) {
	for _, allowed := range cfg.Tools {
		if allowed == name {
			return e.Tool(name)
		}
	}
	return nil, false
}

// editedArguments reads a decision's replacements, by call id.
func editedArguments(d *DecisionRecord) (map[string]json.RawMessage, error) {
	if len(d.Arguments) == 0 {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(d.Arguments, &m); err != nil {
		return nil, fmt.Errorf("runtime: decode edited arguments of run %d: %w", d.RunID, err)
	}
	return m, nil
}

// applyEdits replaces the arguments of the edited calls in the model's
// message that made them, and returns the index of the first message it
// changed, or -1 when it changed none.
func applyEdits(msgs []Message, edits map[string]json.RawMessage) int {
	first := -1
	for i := len(msgs) - 1; i >= 0 && len(edits) > 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		for j, tc := range msgs[i].ToolCalls {
			args, ok := edits[tc.ID]
			if !ok {
				continue
			}
			if first < 0 {
				// A copy: the slice may be shared with the previous
				// checkpoint's encoding.
				msgs[i].ToolCalls = append([]ToolCall(nil), msgs[i].ToolCalls...)
			}
			msgs[i].ToolCalls[j].Arguments = args
			first = i
		}
		if first >= 0 {
			break
		}
	}
	return first
}

func quoteAll(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = fmt.Sprintf("%q", id)
	}
	return strings.Join(q, ", ")
}

// describeFields lists refused fields in a sentence, keys sorted.
func describeFields(fields map[string]string) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + " " + fields[k]
	}
	return strings.Join(parts, "; ")
}

// edit applies an approval's edited arguments before its calls run: the
// model's message that made the calls is rewritten (in the decision's
// step commit), so the tools run with the edited values and the model
// reads what was executed. The approval event names the edited calls; the
// values are content, kept at privacy level full only. It returns the
// edits, by call id.
func (c *Continuation) edit(d *DecisionRecord, pending *PendingTurn, p *ApprovalPayload) (map[string]json.RawMessage, error) {
	edits, err := editedArguments(d)
	if err != nil || len(edits) == 0 {
		return nil, err
	}
	ids := []string{}
	for _, call := range pending.Calls {
		if _, ok := edits[call.ID]; ok {
			ids = append(ids, call.ID)
		}
	}
	p.Edited, p.Arguments = ids, Content{Value: d.Arguments}
	if i := applyEdits(c.state.Messages, edits); i >= 0 && (c.rewrite < 0 || i < c.rewrite) {
		c.rewrite = i
	}
	return edits, nil
}
