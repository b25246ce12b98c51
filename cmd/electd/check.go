package main

import (
	"fmt"
	"io"

	"github.com/electd/electd/config"
)

// cmdCheck is `electd check`: parse and validate the configuration, print
// every problem with its source line, exit 1 on errors (warnings pass).
func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("check")
	configs := fs.pathsFlag("config")
	asJSON := fs.boolFlag("json")
	noEnv := fs.boolFlag("no-env")
	unsafeConfig := fs.boolFlag("allow-unsafe-config")
	vars := fs.inputVars()
	pos, exit, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return exit
	}
	paths := append(*configs, pos...)
	if len(paths) == 0 {
		paths = stringList{"/etc/electd"}
	}
	opts := loadOptions(paths)
	opts.NoEnv, opts.AllowUnsafeFiles, opts.Vars = *noEnv, *unsafeConfig, *vars
	cfg, diags := config.Load(paths, opts)
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
	if w := fileLimitWarning(cfg); w != "" && !*asJSON {
		// This shell's limit, not necessarily the service's: a warning.
		fmt.Fprintln(stderr, w)
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "Success! The configuration is valid (%s, %s).\n",
			plural(len(cfg.Jobs), "job"), plural(len(cfg.Providers), "provider"))
		writeInstances(stdout, cfg.Jobs)
	}
	return 0
}

// writeInstances lists the instances of each job block with for_each, by
// name, in the order the agent runs them: what the block expanded to.
func writeInstances(w io.Writer, jobs []config.Job) {
	var blocks []string
	names := map[string][]string{}
	for _, j := range jobs {
		if j.Key == "" {
			continue
		}
		if _, ok := names[j.Block]; !ok {
			blocks = append(blocks, j.Block)
		}
		names[j.Block] = append(names[j.Block], j.Name)
	}
	for _, b := range blocks {
		fmt.Fprintf(w, "\njob %q (for_each): %s\n", b, plural(len(names[b]), "instance"))
		line := " "
		for _, n := range names[b] {
			if len(line)+1+len(n) > 100 {
				fmt.Fprintln(w, line)
				line = " "
			}
			line += " " + n
		}
		fmt.Fprintln(w, line)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
