// Package migrations holds the numbered SQL migrations, embedded so the
// binary can migrate any database it is pointed at. One DDL statement per
// file: MySQL cannot roll DDL back, so a file that fails half-way must not
// leave half of its statements applied.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
