package main

import (
	"fmt"
	"io"
)

// cmdCheck is `electd check`. Placeholder until the config helper lands it.
func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "electd check: not implemented yet")
	return 1
}

// cmdFmt is `electd fmt`. Placeholder until the config helper lands it.
func cmdFmt(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "electd fmt: not implemented yet")
	return 1
}
