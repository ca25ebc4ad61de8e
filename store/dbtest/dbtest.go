// Package dbtest gives each test a database of its own on a real MySQL, with
// every migration applied, dropped when the test ends.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/turnstile-dev/turnstile/store"
)

// DefaultDSN is used when TURNSTILE_DSN is not set: the MySQL these
// machines run on 127.0.0.1:3306.
const DefaultDSN = "root@tcp(127.0.0.1:3306)/"

// ServerDSN returns the DSN of the server tests run against, without a
// database name.
func ServerDSN() string {
	dsn := os.Getenv("TURNSTILE_DSN")
	if dsn == "" {
		dsn = DefaultDSN
	}
	return dsn
}

// New creates a fresh, migrated database and returns a pool on it and its
// DSN. The database is dropped when the test ends. With no MySQL to reach
// the test fails with what to do: tests are never skipped for want of one.
func New(t testing.TB) (*sqlx.DB, string) {
	t.Helper()
	return NewOn(t, ServerDSN())
}

// NewOn is New on the server of another DSN (a cluster's node: the
// database is then on every node).
func NewOn(t testing.TB, serverDSN string) (*sqlx.DB, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		t.Fatalf("dbtest: TURNSTILE_DSN: %v", err)
	}
	cfg.DBName = ""
	admin, err := store.Open(ctx, cfg.FormatDSN())
	if err != nil {
		t.Fatalf("dbtest: no MySQL to test against (%v); run the tests through 'make test', which finds or starts one, or set TURNSTILE_DSN", err)
	}
	defer admin.Close()
	b := make([]byte, 6)
	rand.Read(b)
	name := "turnstile_test_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("dbtest: create database: %v", err)
	}
	cfg.DBName = name
	dsn := cfg.FormatDSN()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", name, err)
	}
	t.Cleanup(func() {
		db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cfg.DBName = ""
		admin, err := store.Open(ctx, cfg.FormatDSN())
		if err != nil {
			t.Errorf("dbtest: drop %s: %v", name, err)
			return
		}
		defer admin.Close()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("dbtest: drop %s: %v", name, err)
		}
	})
	if err := store.Migrate(ctx, db); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return db, dsn
}
