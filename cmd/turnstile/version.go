package main

import (
	"fmt"
	"io"
	goruntime "runtime"
	"runtime/debug"
	"strings"
)

// version prints what the binary was built from, for a bug report.
func version(args []string, e env) error {
	fs := newFlagSet("version", e)
	fs.usage = func(w io.Writer) {
		fmt.Fprintln(w, "Usage: turnstile version\n\nPrints the module version, the VCS revision it was built from (\"modified\"\nwhen the tree had uncommitted changes), the commit time and the Go version.")
	}
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("version: unexpected arguments %q", fs.Args())
	}
	info, _ := debug.ReadBuildInfo() // nil when the binary has none
	fmt.Fprintln(e.stdout, versionLine(info))
	return nil
}

// versionLine reads "turnstile v1.2.0, revision 0123abcd… (modified),
// committed 2025-06-01T10:00:00Z, go1.26.0 linux/amd64" out of the build
// information (nil when the binary has none). `go build` in a git checkout
// records the revision; `go run` and test binaries do not.
func versionLine(info *debug.BuildInfo) string {
	mod, goVersion := "(unknown)", goruntime.Version()
	settings := map[string]string{}
	if info != nil {
		if info.Main.Version != "" {
			mod = info.Main.Version
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
	}
	parts := []string{"turnstile " + mod}
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " (modified)"
		}
		parts = append(parts, "revision "+rev)
		if t := settings["vcs.time"]; t != "" {
			parts = append(parts, "committed "+t)
		}
	} else {
		parts = append(parts, "no VCS revision recorded")
	}
	return strings.Join(append(parts, goVersion+" "+goruntime.GOOS+"/"+goruntime.GOARCH), ", ")
}
