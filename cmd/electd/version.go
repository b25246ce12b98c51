package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// Stamped at build time by make and the packages, from scripts/version.sh:
// -ldflags "-X main.version=0.9.0 -X main.commit=...". A plain `go build`
// stamps nothing.
var (
	version = ""
	commit  = ""
)

// releaseVersion is the release number (0.9.0, or 0.9.0+4.gabc1234def0 past
// the tag), or for an unstamped build 0.0.0-dev+COMMIT, as scripts/version.sh
// gives an untagged tree: it sorts before every release.
func releaseVersion() string {
	if version != "" {
		return version
	}
	c := buildCommit()
	if len(c) > 12 {
		c = c[:12]
	}
	return "0.0.0-dev+" + c
}

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
	fs := newCommand("version")
	if _, exit, ok := fs.parse(args, stdout, stderr); !ok {
		return exit
	}
	fmt.Fprintf(stdout, "electd %s (commit %s, %s %s/%s)\n", releaseVersion(), buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
