package main

import (
	"fmt"
	"io"
)

// cmdRun is `electd run`. Owned by the lead; wired to the agent package.
func cmdRun(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "electd run: not wired yet")
	return 1
}
