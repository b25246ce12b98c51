package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/electd/electd/config"
)

// command is a subcommand's flags and what its -h prints. Every subcommand
// parses its arguments through it, so all of them take flags before and
// after their positional arguments, honour "--", and refuse arguments they
// would otherwise drop silently.
type command struct {
	*flag.FlagSet
	operands string // the positionals in the usage line: "JOB", "[PATH...]"
	about    string // one sentence on what the command does
	min, max int    // how many positionals it takes; max < 0: no limit
}

func newCommand(name, operands string, min, max int, about string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// parse prints errors and usage itself: help goes to stdout, errors to
	// stderr, which the flag package cannot tell apart.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &command{FlagSet: fs, operands: operands, about: about, min: min, max: max}
}

// parse parses args and returns the positionals. ok is false when the
// command must stop with exit: 0 after -h (usage on stdout), 2 after a bad
// flag or a wrong number of positionals (the problem and usage on stderr).
func (c *command) parse(args []string, stdout, stderr io.Writer) (pos []string, exit int, ok bool) {
	flags, pos := c.split(args)
	err := c.Parse(flags)
	switch {
	case errors.Is(err, flag.ErrHelp):
		if s, ok := stdout.(*helpSink); ok {
			s.cmd = c // the man page and completions read the command itself
		}
		c.usage(stdout)
		return nil, 0, false
	case err == nil && len(pos) < c.min:
		err = fmt.Errorf("missing %s", c.operands)
	case err == nil && c.max >= 0 && len(pos) > c.max:
		err = fmt.Errorf("unexpected argument %q", pos[c.max])
	}
	if err != nil {
		fmt.Fprintf(stderr, "electd %s: %v\n\n", c.Name(), err)
		c.usage(stderr)
		return nil, 2, false
	}
	return pos, 0, true
}

// split separates the flags, with their values, from the positionals. Go's
// flag package stops at the first positional, but docs/cli.md writes flags after
// them (`electd step-down JOB [-addr URL]`), so this walks the whole list.
func (c *command) split(args []string) (flags, pos []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flags, append(pos, args[i+1:]...)
		case len(a) < 2 || a[0] != '-': // "-" alone is a positional: stdin for fmt
			pos = append(pos, a)
		default:
			flags = append(flags, a)
			if c.takesValue(a) && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	return flags, pos
}

// takesValue reports whether the flag argument a consumes the next argument
// as its value, as the flag package will: a known non-boolean flag without
// "=". Unknown flags are left for Parse to report.
func (c *command) takesValue(a string) bool {
	name := strings.TrimPrefix(a[1:], "-")
	if strings.Contains(name, "=") {
		return false
	}
	f := c.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// usage prints the usage line, what the command does, and its flags with
// their descriptions and defaults.
func (c *command) usage(w io.Writer) {
	hasFlags := false
	c.VisitAll(func(*flag.Flag) { hasFlags = true })
	line := "Usage: electd " + c.Name()
	if hasFlags {
		line += " [flags]"
	}
	if c.operands != "" {
		line += " " + c.operands
	}
	fmt.Fprintf(w, "%s\n\n%s\n", line, c.about)
	if hasFlags {
		fmt.Fprint(w, "\nFlags:\n")
		c.SetOutput(w)
		c.PrintDefaults()
		c.SetOutput(io.Discard)
	}
}

// varFlags registers -var and -var-file, which set the configuration's
// input variables, on one list in the order given: a later one wins, as in
// Terraform.
func (c *command) varFlags() *[]config.Var {
	var vars []config.Var
	c.Func("var", "set an input variable: `NAME=VALUE` (repeatable; a later -var or -var-file wins)", func(s string) error {
		v, err := config.ParseVar(s)
		if err != nil {
			return err
		}
		vars = append(vars, v)
		return nil
	})
	c.Func("var-file", "set input variables from `FILE`, NAME = VALUE lines in HCL, or JSON when it ends in .json (repeatable)", func(s string) error {
		vars = append(vars, config.Var{File: s})
		return nil
	})
	return &vars
}
