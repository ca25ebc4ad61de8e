package main

import (
	"context"
	"net"
	"strings"

	"github.com/turnstile-dev/turnstile/runtime/outbox"
	"github.com/turnstile-dev/turnstile/runtime/webhook"
)

// deliveryLoops is how many delivery loops a process with workers runs;
// each sends a claimed batch concurrently.
const deliveryLoops = 2

// deliver runs the outbox's delivery loops until ctx ends: every process
// that runs workers delivers notifications, whoever wrote them. The loops
// are the workers' alone, so a receiver never slows a continuation.
func (a *app) deliver(ctx context.Context) {
	var wm outbox.Metrics // nil counts nothing
	if a.metrics != nil {
		wm = a.metrics
	}
	self := append([]string{a.publicURL}, a.self...)
	ob := outbox.New(outbox.Options{Store: a.store, Sealer: a.sealer, Metrics: wm, Logger: a.log,
		Sender: webhook.New(webhook.Options{Getenv: a.getenv, Self: self, AllowPrivate: a.allowPrivate})})
	ob.Run(ctx, deliveryLoops)
}

// defaultPublicURL is the public URL serve assumes without --public-url:
// its own listen address, a wildcard one as 127.0.0.1.
func defaultPublicURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// publicURLOrDefault is --public-url, else what the command assumes
// (serve: its --addr; work, which listens nowhere: serve's default).
func (d *dbFlags) publicURLOrDefault() string {
	if u := strings.TrimSpace(d.publicURL); u != "" {
		return strings.TrimRight(u, "/")
	}
	if d.publicDefault != "" {
		return d.publicDefault
	}
	return defaultPublicURL("127.0.0.1:8080")
}

// warnPublicURL warns at start when some configuration notifies people
// and --public-url is unset: their links would name a guessed address.
func warnPublicURL(ctx context.Context, a *app, d dbFlags) {
	if !d.runsAgents() || strings.TrimSpace(d.publicURL) != "" {
		return
	}
	cfgs, err := a.store.Configurations(ctx)
	if err != nil {
		return
	}
	for _, c := range cfgs {
		if len(c.Notify) > 0 {
			a.log.Warn("notifications link to a guessed address", "public_url", a.publicURL,
				"configuration", c.Identifier, "hint", "set --public-url or TURNSTILE_PUBLIC_URL to where people reach this Turnstile")
			return
		}
	}
}
