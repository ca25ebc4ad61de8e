package main

import "testing"

// The feed phase reads run lines by hand; it reads what the server writes.
func TestRunLineKey(t *testing.T) {
	k, ok := runLineKey([]byte(`{"type":"run","cursor":"12-1700000000","run_id":42,"change":"decided","status":"running","configuration":"x","turn":1}`))
	if !ok || k != (feedKey{42, "decided"}) {
		t.Fatalf("runLineKey = %v, %v; want run 42 decided", k, ok)
	}
	if _, ok := runLineKey([]byte(`{"type":"keepalive","cursor":"12-1700000000"}`)); ok {
		t.Fatal("a keepalive read as a run line")
	}
}
