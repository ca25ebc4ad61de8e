package templates

import (
	"testing"
	"time"
)

func TestExpiresIn(t *testing.T) {
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{3*time.Hour - 200*time.Millisecond, "expires in 3 h"}, // rendered a moment after the pause
		{90 * time.Minute, "expires in 1 h 30 min"},
		{45 * time.Second, "expires in 45 s"},
		{26 * time.Hour, "expires in 1 d"},
		{0, "expired; settled shortly"},
		{-time.Minute, "expired; settled shortly"},
	} {
		if got := expiresIn(at.Add(tc.d), at); got != tc.want {
			t.Errorf("expiresIn(%v): got %q, want %q", tc.d, got, tc.want)
		}
	}
}

// An approval event of an expiry names no person: the timeline says
// nobody decided in time, and the reason says how long it waited.
func TestTimelineOfAnExpiry(t *testing.T) {
	e := timelineEvent(3, "approval", 0, "", time.Time{},
		`{"by": "", "expired": true, "decision": "deny", "calls": 1, "scope": "once", "reason": "no decision within 24h0m0s"}`)
	if e.Decision == nil || e.Decision.By != "Nobody in time" || e.Decision.Reason != "no decision within 24h0m0s" {
		t.Errorf("decision step = %+v, want by nobody in time, with the reason", e.Decision)
	}
	if e := timelineEvent(3, "approval", 0, "", time.Time{}, `{"by": "olga", "decision": "deny"}`); e.Decision.By != "olga" {
		t.Errorf("a person's decision reads as by %q", e.Decision.By)
	}
}
