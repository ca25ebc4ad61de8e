package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
)

// The README's configuration reference is --help, verbatim: this keeps it
// from drifting when a flag changes.
func TestREADMEHasTheHelpOfEveryServerCommand(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"help"}, {"serve", "--help"}, {"work", "--help"}} {
		var out bytes.Buffer
		err := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(""), &out, &out)
		if err != nil && !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%v: %v", args, err)
		}
		help := strings.TrimRight(out.String(), "\n")
		if !bytes.Contains(readme, []byte("```\n"+help+"\n```")) {
			t.Errorf("README.md lacks the current output of turnstile %s, verbatim in a code block:\n%s", strings.Join(args, " "), help)
		}
	}
}
