// Command loadtest drives a running turnstile server with streamed and
// durable decisions and prints a Markdown table of what it measured: open
// streamed continuations and the server's memory for them, keepalive
// punctuality, the time from a decision's POST to its first line, and the
// rate at which the durable path records decisions; and, when
// named, the silences of thousands of streams decided in the same instant
// (burst) and what a flood of wrong-password sign-ins costs the server.
//
// It prepares its own data when given the server's database (--dsn): a
// user, a bearer token, two load configurations and the waiting runs,
// created in bulk through the store and the engine. Without --dsn it
// starts the runs through POST /api/runs with --token.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}
