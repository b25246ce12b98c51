package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/electd/electd/config"
)

// cmdCheck is `electd check`: parse and validate the configuration, print
// every problem with its source line, exit 1 on errors (warnings pass).
func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: electd check [-config PATH]... [-json] [PATH...]")
		fs.PrintDefaults()
	}
	var paths stringList
	fs.Var(&paths, "config", "configuration file or directory (repeatable; default /etc/electd)")
	asJSON := fs.Bool("json", false, "print the result as JSON on stdout, in the shape of `terraform validate -json`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	paths = append(paths, fs.Args()...)
	if len(paths) == 0 {
		paths = stringList{"/etc/electd"}
	}
	cfg, diags := config.Load(paths)
	if *asJSON {
		if err := diags.WriteJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "electd check:", err)
			return 1
		}
	} else {
		if err := diags.WriteText(stderr); err != nil {
			fmt.Fprintln(stderr, "electd check:", err)
			return 1
		}
	}
	if diags.HasErrors() {
		return 1
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "Success! The configuration is valid (%s, %s).\n",
			plural(len(cfg.Jobs), "job"), plural(len(cfg.Providers), "provider"))
	}
	return 0
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
