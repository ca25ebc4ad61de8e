package runtime

import "encoding/json"

// Standing approvals. An approval with scope=session approves each of its
// calls' tools for the rest of the run: a later call of one runs without a
// pause. What stands is named after the call as it runs, never as the model
// proposed it: for a tool that calls others (StandingNamer) the name
// depends on the arguments, and an edit may change which tool the call
// runs (an MCP meta-tool's execute of charge, edited into one of lookup,
// stands for lookup alone). The claim stores these names with the decision,
// and the continuation that applies it adds the same to its own set; both
// ask standingNames.

// standingName is what a standing approval must name to cover a call with
// its arguments: the tool it calls, for a tool that calls others, else its
// own name.
func standingName(t Tool, call ToolCall) string {
	if n, ok := t.(StandingNamer); ok {
		return n.StandingName(call.Arguments)
	}
	return call.Name
}

// standingNames names what an approval of the turn for the rest of the run
// approves: for each call, what a standing approval of it covers as it
// runs, with the approval's edited arguments (by call id, as the decision
// stores them) where it edited the call. A call left as it was offered has
// the name the turn recorded for it when the run paused, so that deciding
// needs no tool; an edited call's tool (found by tool) is asked again for
// the edited arguments. An edited call whose tool cannot be found stands
// for its own name, which covers no tool behind it.
func standingNames(turn *PendingTurn, edits map[string]json.RawMessage, tool func(name string) (Tool, bool)) []string {
	names := make([]string, 0, len(turn.Calls))
	for _, call := range turn.Calls {
		args, edited := edits[call.ID]
		if !edited {
			names = append(names, turn.StandingName(call))
			continue
		}
		name := call.Name
		if t, ok := tool(call.Name); ok {
			call.Arguments = args
			name = standingName(t, call)
		}
		names = append(names, name)
	}
	return names
}

// standing names the tools an approval for the session approves for the
// rest of the run, for the decision as it is to be stored: none for a
// denial or an approval of this turn alone.
func (p *pipeline) standing(d DecisionRecord) ([]string, error) {
	if !p.approve || d.Scope != ScopeSession {
		return nil, nil
	}
	edits, err := editedArguments(&d)
	if err != nil {
		return nil, err
	}
	// Of a turn decided call by call, only the approved calls stand.
	return standingNames(approvedTurn(p.state.Pending, p.approves), edits, p.tool), nil
}

// tool is a turn's tool as checkEdits found it.
func (p *pipeline) tool(name string) (Tool, bool) {
	t, ok := p.tools[name]
	return t, ok
}
