# Developer and CI entry points. The targets that need MySQL get a DSN from
# cmd/devdb: TURNSTILE_DSN when set, else the server on 127.0.0.1:3306, else
# a private MariaDB/MySQL it starts under ./var (go run ./cmd/devdb -stop
# stops that one).
#
# Each such recipe captures the DSN into a shell variable, so devdb runs once
# and only for the targets that need it; when devdb fails, its message is on
# stderr and the `&&` ends the recipe, and make with it. `set -x` then shows
# the command as it runs, DSN included.

.PHONY: run demo-reset test bench fuzz generate lint build screenshots a11y
.DEFAULT_GOAL := build

# ARGS go to serve: make run ARGS='--addr 127.0.0.1:9090' (or set
# TURNSTILE_ADDR). serve prints the URL to open once it listens.
run:
	@dsn=$$(go run ./cmd/devdb -database turnstile) && set -x && \
	TURNSTILE_DSN="$$dsn" go run ./cmd/turnstile serve --demo $(ARGS)

# Replays the tour on make run's database: the demo's runs and refunds are
# deleted and its waiting runs started again; users keep their passwords.
demo-reset:
	@dsn=$$(go run ./cmd/devdb -database turnstile) && set -x && \
	TURNSTILE_DSN="$$dsn" go run ./cmd/turnstile demo reset

test:
	@dsn=$$(go run ./cmd/devdb) && set -x && \
	TURNSTILE_DSN="$$dsn" go test -race -count=1 -timeout 20m ./...

bench:
	@dsn=$$(go run ./cmd/devdb) && set -x && \
	TURNSTILE_DSN="$$dsn" go test -run '^$$' -bench . -benchmem ./...

# The README's screenshots, made by a browser test on a demo-like state
# (Chromium needed).
screenshots:
	@dsn=$$(go run ./cmd/devdb) && set -x && \
	TURNSTILE_DSN="$$dsn" TURNSTILE_SCREENSHOTS="$(CURDIR)/web/testdata/screenshots" \
		go test -count=1 -run TestScreenshots ./web/

# The accessibility check alone: axe-core on every page, each role, two
# widths, and the keyboard-only decision (Chromium needed).
a11y:
	@dsn=$$(go run ./cmd/devdb) && set -x && \
	TURNSTILE_DSN="$$dsn" go test -count=1 -run 'TestAccessibility|TestKeyboard' ./web/

# Each fuzz target for FUZZTIME (10s unless set), without MySQL.
fuzz:
	.ci/fuzz

generate:
	go tool templ generate

# The generated _templ.go files are committed, so lint regenerates them and
# fails when that changes or adds any: someone edited a .templ file without
# running `make generate`.
lint:
	@unformatted=$$(gofmt -l .) && if [ -n "$$unformatted" ]; then \
		echo "lint: not gofmt-formatted (run gofmt -w):" >&2; echo "$$unformatted" >&2; exit 1; \
	fi
	go vet ./...
	go tool templ generate
	@if ! git diff --quiet -- '*_templ.go' || \
		[ -n "$$(git ls-files --others --exclude-standard -- '*_templ.go')" ]; then \
		git status --short -- '*_templ.go' >&2; \
		echo "lint: generated templ files are stale; run 'make generate' and commit them" >&2; \
		exit 1; \
	fi

build:
	go build -o bin/turnstile ./cmd/turnstile
