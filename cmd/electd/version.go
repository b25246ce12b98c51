package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Stamped at release build time: -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = ""
)

// buildCommit falls back to the VCS revision Go records when built in a checkout.
func buildCommit() string {
	if commit != "" {
		return commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("version", "", 0, 0, "Print the version of electd, the commit it was built from, and the Go version and platform.")
	if _, exit, ok := fs.parse(args, stdout, stderr); !ok {
		return exit
	}
	fmt.Fprintf(stdout, "electd %s (commit %s, %s %s/%s)\n", version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
