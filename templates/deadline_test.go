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
