package templates

import "testing"

func TestReasonText(t *testing.T) {
	for reason, want := range map[string]string{
		"provider_failed":  "the model could not be reached or refused",
		"max_iterations":   "it reached its limit of rounds",
		"unreadable_state": "its saved state cannot be read",
		"tool_unavailable": "a tool it needs is not available",
		"owner_deleted":    "cancelled: its owner was deleted",
		"something_new":    "something new",
	} {
		if got := ReasonText(reason); got != want {
			t.Errorf("ReasonText(%q) = %q, want %q", reason, got, want)
		}
	}
}
