package dbtest_test

import (
	"testing"

	"github.com/turnstile-dev/turnstile/store/dbtest"
)

func TestNewMigrates(t *testing.T) {
	db, _ := dbtest.New(t)
	var n int
	if err := db.Get(&n, "SELECT COUNT(*) FROM runs"); err != nil {
		t.Fatal(err)
	}
}
